# frozen_string_literal: true

require "test_helper"

# The Rack 3 contract through real sockets: the echo app runs under
# Rack::Lint, so any SPEC violation in the env or in how the response is
# handled would come back as a 500.
class LintTest < Minitest::Test
  include SharedServer
  server "echo.ru"

  def fields(res) = res.body.lines.to_h { |l| l.chomp.split(": ", 2) }

  def test_get_on_both_transports
    server.each_transport do |name, open|
      s = open.call
      res = HTTPClient.request(s, "/p/a%20th?q=1&r=2", headers: { "X-Test" => "a" })
      assert_equal 200, res.status, "#{name}: #{res.body}"
      f = fields(res)
      assert_equal "GET", f["REQUEST_METHOD"]
      assert_equal "/p/a%20th", f["PATH_INFO"]
      assert_equal "q=1&r=2", f["QUERY_STRING"]
      assert_equal "HTTP/1.1", f["SERVER_PROTOCOL"]
      assert_equal "test", f["SERVER_NAME"]
      assert_equal "80", f["SERVER_PORT"]
      assert_equal "127.0.0.1", f["REMOTE_ADDR"]
      assert_equal "a", f["HTTP_X_TEST"]
      assert_equal "http", f["rack.url_scheme"]
      assert_nil res["connection"]
      s.close
    end
  end

  def test_head_has_no_body
    s = server.tcp
    res = HTTPClient.request(s, "/", method: "HEAD")
    assert_equal 200, res.status
    assert_equal "", res.body
    # the connection is still in sync: a GET right after gets its own answer
    assert_equal 200, HTTPClient.request(s, "/after").status
  ensure
    s&.close
  end

  def test_post_with_content_length
    server.each_transport do |name, open|
      s = open.call
      res = HTTPClient.request(s, "/post", method: "POST", body: "a=1&b=2",
                                           headers: { "Content-Type" => "application/x-www-form-urlencoded" })
      f = fields(res)
      assert_equal 200, res.status, name
      assert_equal "7", f["CONTENT_LENGTH"]
      assert_equal "application/x-www-form-urlencoded", f["CONTENT_TYPE"]
      assert_equal "a=1&b=2", f["body"]
      s.close
    end
  end

  def test_post_chunked_is_decoded
    s = server.unix
    s.write("POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" \
            "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n")
    res = HTTPClient.read_response(s)
    f = fields(res)
    assert_equal 200, res.status
    assert_equal "hello world", f["body"]
    assert_equal "11", f["CONTENT_LENGTH"]
  ensure
    s&.close
  end

  def test_keepalive_serves_many_requests_on_one_connection
    s = server.tcp
    pids = 5.times.map do |i|
      res = HTTPClient.request(s, "/k#{i}")
      assert_equal "/k#{i}", fields(res)["PATH_INFO"]
      fields(res)["pid"]
    end
    assert_equal 1, pids.uniq.size
  ensure
    s&.close
  end

  def test_pipelined_requests_are_answered_in_order
    server.each_transport do |_, open|
      s = open.call
      reqs = (1..6).map do |i|
        if i.even?
          "POST /p#{i} HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nb#{i}x"
        else
          "GET /p#{i} HTTP/1.1\r\nHost: t\r\n\r\n"
        end
      end
      s.write(reqs.join)
      (1..6).each do |i|
        res = HTTPClient.read_response(s)
        assert_equal "/p#{i}", fields(res)["PATH_INFO"]
        assert_equal "b#{i}x", fields(res)["body"] if i.even?
      end
      s.close
    end
  end

  def test_http10_closes_by_default
    s = server.tcp
    s.write("GET /old HTTP/1.0\r\n\r\n")
    res = HTTPClient.read_response(s)
    assert_equal 200, res.status
    assert_equal "HTTP/1.0", fields(res)["SERVER_PROTOCOL"]
    assert_equal "close", res["connection"]
    assert HTTPClient.closed?(s)
  ensure
    s&.close
  end

  def test_http10_keepalive_when_asked
    s = server.tcp
    s.write("GET /old HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    res = HTTPClient.read_response(s)
    assert_equal "keep-alive", res["connection"]
    s.write("GET /again HTTP/1.0\r\n\r\n")
    assert_equal "/again", fields(HTTPClient.read_response(s))["PATH_INFO"]
  ensure
    s&.close
  end

  def test_absolute_form_target
    s = server.tcp
    s.write("GET http://example.com:8080/abs?x=y HTTP/1.1\r\nHost: ignored\r\n\r\n")
    f = fields(HTTPClient.read_response(s))
    assert_equal "/abs", f["PATH_INFO"]
    assert_equal "x=y", f["QUERY_STRING"]
    assert_equal "example.com", f["SERVER_NAME"]
    assert_equal "8080", f["SERVER_PORT"]
  ensure
    s&.close
  end

  def test_underscore_header_cannot_clobber_dash_header
    s = server.tcp
    s.write("GET / HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 1.1.1.1\r\nX_Forwarded_For: 6.6.6.6\r\n\r\n")
    assert_equal "1.1.1.1", fields(HTTPClient.read_response(s))["HTTP_X_FORWARDED_FOR"]
  ensure
    s&.close
  end

  # httpoxy: CGI-style code takes HTTP_PROXY for the proxy to send its own
  # outgoing requests through, and a client could name one.
  def test_proxy_header_never_becomes_http_proxy
    s = server.tcp
    s.write("GET / HTTP/1.1\r\nHost: t\r\nProxy: http://evil.example:8080\r\nX-Test: kept\r\n\r\n")
    f = fields(HTTPClient.read_response(s))
    assert_equal "kept", f["HTTP_X_TEST"]
    refute f.key?("HTTP_PROXY"), "HTTP_PROXY reached the app: #{f['HTTP_PROXY']}"
  ensure
    s&.close
  end

  def test_repeated_fields_are_combined
    s = server.tcp
    s.write("GET / HTTP/1.1\r\nHost: t\r\nCookie: a=1\r\nCookie: b=2\r\nX-Test: x\r\nX-Test: y\r\n\r\n")
    f = fields(HTTPClient.read_response(s))
    assert_equal "a=1; b=2", f["HTTP_COOKIE"]
    assert_equal "x, y", f["HTTP_X_TEST"]
  ensure
    s&.close
  end

  # The env of each request is built from a template that keeps the last
  # request's method, peer and host: a request unlike the last must get
  # its own, on one connection (one worker, one exchange) as anywhere.
  def test_values_never_carry_over_between_requests
    s = server.tcp
    want = [
      ["DELETE /a HTTP/1.1\r\nHost: one.example:8081\r\n\r\n",
       { "REQUEST_METHOD" => "DELETE", "SERVER_NAME" => "one.example", "SERVER_PORT" => "8081", "body" => "" }],
      ["PURGE /b HTTP/1.1\r\nHost: two.example\r\n\r\n",
       { "REQUEST_METHOD" => "PURGE", "SERVER_NAME" => "two.example", "SERVER_PORT" => "80" }],
      ["GET /c HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
       { "REQUEST_METHOD" => "GET", "SERVER_NAME" => "127.0.0.1", "SERVER_PORT" => server.port.to_s,
         "SERVER_PROTOCOL" => "HTTP/1.0" }],
      ["POST /d HTTP/1.1\r\nHost: two.example\r\nContent-Length: 3\r\n\r\nabc",
       { "REQUEST_METHOD" => "POST", "SERVER_NAME" => "two.example", "SERVER_PORT" => "80", "body" => "abc",
         "SERVER_PROTOCOL" => "HTTP/1.1" }],
      ["GET /e HTTP/1.1\r\nHost: one.example:8081\r\n\r\n",
       { "REQUEST_METHOD" => "GET", "SERVER_NAME" => "one.example", "SERVER_PORT" => "8081", "body" => "",
         "REMOTE_ADDR" => "127.0.0.1" }]
    ]
    want.each do |request, expected|
      s.write(request)
      f = fields(HTTPClient.read_response(s))
      expected.each { |k, v| assert_equal v, f[k], "#{k} for #{request.lines.first.inspect}" }
    end
  ensure
    s&.close
  end
end
