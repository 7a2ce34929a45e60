# frozen_string_literal: true

require "rack3_helper"
require_relative "nginx_proxy"
require_relative "haproxy_proxy"

# env["rack.early_hints"]: 103 responses before the final one, HTTP/1.1 only.
class EarlyHintsTest < Minitest::Test
  include SharedServer
  server "rack3.ru", "--early-hints", env: Rack3Files.server_env

  def raw_until_final(sock, path, version: "1.1")
    sock.write("GET #{path} HTTP/#{version}\r\nHost: t\r\n\r\n")
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    raw = +""
    raw << HTTPClient.read_line(sock, deadline) until raw.match?(/HTTP\/1.1 200 OK\r\n.*?\r\n\r\n/m)
    raw
  end

  def test_hints_come_before_the_final_response
    s = server.tcp
    raw = raw_until_final(s, "/hints")
    hints = raw.split("HTTP/1.1 200 OK\r\n").first
    assert_equal "HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload; as=style\r\n\r\n" \
                 "HTTP/1.1 103 Early Hints\r\nlink: </a.js>; rel=preload\r\nlink: </b.js>; rel=preload\r\n\r\n",
                 hints
    assert_equal "final", HTTPClient.read_bytes(s, 5, Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5)
    assert_equal 200, HTTPClient.request(s, "/pid").status, "the connection goes on"
  ensure
    s&.close
  end

  def test_no_hints_for_http10
    s = server.tcp
    s.write("GET /hints HTTP/1.0\r\n\r\n")
    res = HTTPClient.read_response(s)
    assert_equal 200, res.status
    assert_equal "no hints", res.body
    t = server.tcp
    t.write("GET /nolint/early-hints-http10 HTTP/1.0\r\n\r\n")
    assert_equal "false", HTTPClient.read_response(t).body
  ensure
    s&.close
    t&.close
  end

  def test_hint_fields_are_checked_like_the_final_responses
    s = server.tcp
    raw = raw_until_final(s, "/nolint/hints-bad")
    assert raw.start_with?("HTTP/1.1 103 Early Hints\r\nlink: </ok.css>\r\n\r\nHTTP/1.1 200 OK\r\n"), raw
    refute_match(/Injected|connection/i, raw)
    assert_match(/dropped response header "x-bad"/, server.log_until(/x-bad/))
    assert_equal "after bad hints", HTTPClient.read_bytes(s, 15, Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5)
  ensure
    s&.close
  end

  # An app sending hints in a loop to a client that reads nothing: a hint
  # goes out only when the client took the ones before, so the worker
  # keeps no more than a socket's worth. Before, every hint was kept: 40 MB
  # for 40,000 hints of 1 KiB. The bound leaves room for the Ruby's own
  # growth over the run: 13-15 MB on 3.1, up to 17 MB seen on 3.4.
  def test_hints_to_a_client_that_does_not_read_are_bounded
    rss = server.rss_kib
    s = server.unix
    s.write("GET /nolint/hints-flood?n=40000 HTTP/1.1\r\nHost: t\r\n\r\n")
    assert_match(/hints flood done/, server.log_until(/hints flood done/, timeout: 30))
    growth = server.rss_kib - rss
    assert_operator growth, :<, 24 * 1024, "RSS grew #{growth} KiB" unless ENV["ORIBI_SANITIZE"]
    t = server.unix # the worker still serves
    assert_equal 200, HTTPClient.request(t, "/pid").status
  ensure
    s&.close
    t&.close
  end

  def test_hints_after_the_head_went_out_are_not_sent
    s = server.tcp
    s.write("GET /hints-late HTTP/1.1\r\nHost: t\r\n\r\n")
    data = +""
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    while (c = HTTPClient.read_some(s, 4096, deadline))
      data << c
    end
    assert data.start_with?("HTTP/1.1 200 OK\r\n"), data
    assert data.end_with?("\r\n\r\nbody"), data
    refute_includes data, "103"
  ensure
    s&.close
  end
end

# Early hints behind the proxies Oribi is deployed behind. nginx before
# 1.29 (Debian 12 ships 1.22) takes a 103 for the final response: a GET got
# the 103 with Oribi's 200 head as its body, and the rest only when the
# upstream connection closed; a HEAD got the 103 as its answer. So
# rack.early_hints is offered only when configured (early_hints), as Puma
# does, and an app that calls it when offered (Rails does by default) is
# answered right through either proxy. With early_hints on, behind these
# and six more: test/early_hints_proxies_test.rb.
class EarlyHintsProxyTest < Minitest::Test
  def deadline(seconds) = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds

  def with_server(*args)
    server = ServerProcess.new("rack3.ru", *args, env: Rack3Files.server_env)
    yield server
  ensure
    server&.stop
  end

  # The app's 200 with its own body, within 5 s (nginx 1.22 behind a 103
  # waits for keepalive_timeout, 20 s), for GET and HEAD alike.
  def assert_final_answers(proxy, body)
    s = proxy.tcp
    s.write("GET /hints HTTP/1.1\r\nHost: t\r\n\r\n")
    res = HTTPClient.read_response(s, timeout: 5)
    assert_equal 200, res.status, res.raw
    assert_equal body, res.body
    s.write("HEAD /hints HTTP/1.1\r\nHost: t\r\n\r\n")
    res = HTTPClient.read_response(s, timeout: 5, head: true)
    assert_equal 200, res.status, res.raw
  ensure
    s&.close
  end

  def test_not_offered_unless_configured_and_safe_through_nginx
    skip "nginx is not installed: the proxy test did not run" unless NginxProxy.available?
    with_server do |server|
      proxy = NginxProxy.new(server.sock)
      assert_final_answers(proxy, "no hints")
      s = server.tcp
      s.write("GET /nolint/early-hints-http10 HTTP/1.1\r\nHost: t\r\n\r\n")
      assert_equal "false", HTTPClient.read_response(s).body, "rack.early_hints offered by default"
    ensure
      s&.close
      proxy&.stop
    end
  end

  def test_not_offered_unless_configured_and_safe_through_haproxy
    skip "haproxy is not installed: the proxy test did not run" unless HaproxyProxy.available?
    with_server do |server|
      proxy = HaproxyProxy.new(server.sock)
      assert_final_answers(proxy, "no hints")
    ensure
      proxy&.stop
    end
  end

  # Configured, the hints go through haproxy (which forwards 1xx) before
  # the final answer.
  def test_configured_hints_pass_through_haproxy
    skip "haproxy is not installed: the proxy test did not run" unless HaproxyProxy.available?
    with_server("--early-hints") do |server|
      proxy = HaproxyProxy.new(server.sock)
      s = proxy.tcp
      s.write("GET /hints HTTP/1.1\r\nHost: t\r\n\r\n")
      d = deadline(5)
      first = HTTPClient.read_line(s, d)
      assert_equal "HTTP/1.1 103 Early Hints\r\n", first
      raw = +first
      raw << HTTPClient.read_line(s, d) until raw.match?(%r{HTTP/1.1 200 OK\r\n.*?\r\n\r\n}m)
      assert_includes raw, "</style.css>"
      assert_match(/content-length: 5\r\n/i, raw)
      assert_equal "final", HTTPClient.read_bytes(s, 5, d)
    ensure
      s&.close
      proxy&.stop
    end
  end
end
