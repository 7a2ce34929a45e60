# frozen_string_literal: true

require "test_helper"
require_relative "haproxy_proxy"

# CONNECT (RFC 9110 9.3.6): a 2xx answer turns the connection into a tunnel
# right after its head, so it carries no Content-Length or Transfer-Encoding
# and is only ever sent when the app took the socket (rack.hijack); the
# connection never goes on as HTTP after a CONNECT, whatever the answer. A
# proxy switches to tunnel mode on the 2xx: a server that sent one and went
# on parsing requests would serve whatever the client sends next, past the
# proxy's rules.
class ConnectTest < Minitest::Test
  include SharedServer
  server "connect.ru"

  ADMIN = "GET /admin/secret HTTP/1.1\r\nHost: a\r\n\r\n"

  def connect(authority) = "CONNECT #{authority} HTTP/1.1\r\nHost: #{authority}\r\n\r\n"
  def deadline(seconds = 10) = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds

  # A response head, read up to its blank line and not a byte further (what
  # follows a 2xx to CONNECT is the tunnel's).
  def read_head(sock)
    d = deadline
    lines = []
    while (line = HTTPClient.read_line(sock, d)) && line != "\r\n"
      lines << line.chomp
    end
    status = lines.shift
    [status, lines.to_h { |l| k, v = l.split(":", 2); [k.downcase, v.strip] }]
  end

  def assert_echoes(sock, text)
    sock.write(text)
    assert_equal text, HTTPClient.read_bytes(sock, text.bytesize, deadline)
  end

  # Each transport's connection, closed however the block ends: a tunnel
  # left open would keep its echo thread.
  def each_connection
    server.each_transport do |name, open|
      s = open.call
      begin
        yield s, name
      ensure
        s.close
      end
    end
  end

  def refute_app_saw_admin(log = server.log)
    refute_match(%r{app saw GET /admin}, log, "a request sent after a CONNECT reached the app")
  end

  def test_a_2xx_without_hijack_is_refused_and_the_connection_closes
    each_connection do |s, name|
      s.write(connect("plain.test:443") + ADMIN)
      raw = HTTPClient.read_to_close(s)
      assert_match(%r{\AHTTP/1\.1 501 }, raw, name)
      assert_equal 1, raw.scan(%r{^HTTP/1\.1 }).size, "#{name}: one response, then the close: #{raw.inspect}"
      refute_match(/no tunnel here|secret/, raw, name)
    end
    assert_match(/CONNECT plain\.test:443: .*501.*rack\.hijack/, server.log_until(/501/))
    refute_app_saw_admin
  end

  def test_a_non_2xx_answer_goes_out_and_the_connection_closes
    s = server.tcp
    s.write(connect("deny.test:443") + ADMIN)
    raw = HTTPClient.read_to_close(s)
    head, body = raw.split("\r\n\r\n", 2)
    assert_match(%r{\AHTTP/1\.1 403 }, head)
    assert_match(/^connection: close$/i, head)
    assert_equal "denied", body, "one response, then the close"
    refute_app_saw_admin
  ensure
    s&.close
  end

  def test_full_hijack_tunnels_what_follows_the_connect
    each_connection do |s, name|
      s.write(connect("full.test:443") + ADMIN) # in the tunnel these are just bytes
      status, headers = read_head(s)
      assert_equal "HTTP/1.1 200 Connection Established", status, name
      assert_empty headers, "#{name}: only the app wrote the head"
      assert_equal ADMIN, HTTPClient.read_bytes(s, ADMIN.bytesize, deadline), "#{name}: echoed, not served"
      assert_echoes(s, "more bytes")
    end
    refute_app_saw_admin
  end

  def test_partial_hijack_gets_a_head_without_framing
    each_connection do |s, name|
      s.write(connect("partial.test:443") + "early")
      status, headers = read_head(s)
      assert_equal "HTTP/1.1 200 OK", status, name
      %w[content-length transfer-encoding connection].each do |field|
        assert_nil headers[field], "#{name}: #{field} in a 2xx to CONNECT"
      end
      assert_equal "early", HTTPClient.read_bytes(s, 5, deadline), "#{name}: bytes sent with the CONNECT"
      assert_echoes(s, ADMIN)
    end
    refute_app_saw_admin
  end

  # The tunnel attack through a real haproxy: the CONNECT passes its
  # deny rule, and once haproxy saw a 2xx it tunnels whatever the client
  # sends next, straight to the server.
  def test_haproxy_deny_rule_is_not_bypassed_through_connect
    skip "haproxy is not installed: the proxy test did not run" unless HaproxyProxy.available?
    proxy = HaproxyProxy.new(server.sock, frontend: "http-request deny if { path_beg /admin }")
    assert_equal 403, HTTPClient.request(proxy.tcp, "/admin/secret").status, "the rule itself"
    s = proxy.tcp
    s.write(connect("plain.test:443"))
    res = HTTPClient.read_response(s)
    refute_nil res
    assert_equal 501, res.status
    # haproxy, not in tunnel mode, reads the next request and applies its rule
    s.write(ADMIN)
    after = HTTPClient.read_response(s)
    assert_equal 403, after.status, after.raw if after
    refute_app_saw_admin
  ensure
    s&.close
    proxy&.stop
  end

  def test_a_tunnel_through_haproxy_works_when_the_app_hijacks
    skip "haproxy is not installed: the proxy test did not run" unless HaproxyProxy.available?
    proxy = HaproxyProxy.new(server.sock, frontend: "http-request deny if { path_beg /admin }")
    s = proxy.tcp
    s.write(connect("partial.test:443"))
    status, headers = read_head(s)
    assert_match(%r{\AHTTP/1\.1 200 }, status, proxy.log)
    assert_nil headers["content-length"]
    assert_echoes(s, "through the tunnel")
    assert_echoes(s, ADMIN)
  ensure
    s&.close
    proxy&.stop
  end
end
