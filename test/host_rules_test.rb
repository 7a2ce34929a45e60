# frozen_string_literal: true

require "test_helper"
require_relative "haproxy_proxy"

# The Host a proxy's rules see must be the host the app sees. An
# absolute-form target ("GET http://admin.internal/x") carries an
# authority a proxy matching on the Host field does not look at: haproxy
# forwards such a request unchanged, so a request without a Host field
# must not reach the app under the target's authority (RFC 9112 3.2: 400).
class HostRulesTest < Minitest::Test
  include SharedServer
  server "echo.ru"

  DENY = "http-request deny if { hdr(host) -i admin.internal }"

  def test_absolute_form_without_host_is_refused
    ["1.1", "1.0"].each do |version|
      server.each_transport do |name, open|
        s = open.call
        s.write("GET http://admin.internal/x HTTP/#{version}\r\n\r\n")
        res = HTTPClient.read_response(s)
        assert_equal 400, res.status, "#{name} HTTP/#{version}: #{res.raw}"
        assert HTTPClient.closed?(s), "#{name} HTTP/#{version}: closed after the 400"
      ensure
        s&.close
      end
    end
    refute_match(%r{served GET /x}, server.log)
  end

  # With a Host field the authority still names the host (RFC 9112 3.2.2),
  # and HTTP/1.0 without either is served under the listener's address.
  def test_absolute_form_with_host_and_http10_without_host_are_served
    s = server.tcp
    s.write("GET http://a.example/y HTTP/1.1\r\nHost: a.example\r\n\r\n")
    res = HTTPClient.read_response(s)
    assert_equal 200, res.status
    assert_match(/^HTTP_HOST: a\.example$/, res.body)
    t = server.tcp
    t.write("GET /z HTTP/1.0\r\n\r\n")
    res = HTTPClient.read_response(t)
    assert_equal 200, res.status
    assert_match(/^SERVER_NAME: 127\.0\.0\.1$/, res.body)
  ensure
    s&.close
    t&.close
  end

  # The attack: haproxy's deny rule on the Host field, and a request that
  # names the denied host in its target only.
  def test_haproxy_host_rule_is_not_bypassed_by_an_absolute_target
    skip "haproxy is not installed: the proxy test did not run" unless HaproxyProxy.available?
    proxy = HaproxyProxy.new(server.sock, frontend: DENY)
    assert_equal 403, HTTPClient.request(proxy.tcp, "/x", headers: { "Host" => "admin.internal" }).status,
                 "the rule itself"
    ["1.1", "1.0"].each do |version|
      s = proxy.tcp
      s.write("GET http://admin.internal/x HTTP/#{version}\r\n\r\n")
      res = HTTPClient.read_response(s)
      refute_nil res, "HTTP/#{version}: no answer through haproxy"
      refute_equal 200, res.status, "HTTP/#{version}: the denied host was reached: #{res.body}"
      refute_includes res.body, "admin.internal"
    ensure
      s&.close
    end
    refute_match(%r{served GET /x}, server.log)
  ensure
    proxy&.stop
  end
end
