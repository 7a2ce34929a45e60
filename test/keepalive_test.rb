# frozen_string_literal: true

require "test_helper"

# Connection lifetime: idle timeout, requests per connection, header
# timeout against slow clients, and --no-keepalive.
class KeepaliveTest < Minitest::Test
  include SharedServer
  server "echo.ru", "--keepalive-timeout", "1", "--keepalive-requests", "3",
         "--header-timeout", "2", "--body-timeout", "1"

  def test_idle_connection_is_closed_after_the_keepalive_timeout
    s = server.tcp
    assert_equal 200, HTTPClient.request(s, "/").status
    t = now
    assert HTTPClient.closed?(s, timeout: 5), "idle connection was not closed"
    assert_operator now - t, :>=, 0.9, "closed before the keep-alive timeout"
  end

  # The idle time starts when the response is out, not when the request
  # was taken: after an app call longer than the timeout, the client still
  # has the whole timeout to send its next request.
  def test_keepalive_timeout_counts_from_the_response_not_the_request
    srv = ServerProcess.new("slow.ru", "--keepalive-timeout", "1", workers: 1, unix: false)
    s = srv.tcp
    assert_equal 200, HTTPClient.request(s, "/?sleep=1.5").status
    t = now
    assert HTTPClient.closed?(s, timeout: 5), "idle connection was not closed"
    assert_operator now - t, :>=, 0.9, "closed #{(now - t).round(3)} s after a response that took longer than the timeout"
  ensure
    srv&.stop
  end

  def test_connection_closes_after_keepalive_requests
    s = server.tcp
    r1 = HTTPClient.request(s, "/1")
    r2 = HTTPClient.request(s, "/2")
    r3 = HTTPClient.request(s, "/3")
    assert_nil r1["connection"]
    assert_nil r2["connection"]
    assert_equal "close", r3["connection"]
    assert HTTPClient.closed?(s)
  end

  def test_client_connection_close_is_honoured
    s = server.tcp
    res = HTTPClient.request(s, "/", headers: { "Connection" => "close" })
    assert_equal "close", res["connection"]
    assert HTTPClient.closed?(s)
  end

  def test_slow_head_gets_408_and_does_not_block_others
    slow = server.tcp
    slow.write("GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ") # and nothing more
    t = now
    # meanwhile other clients are served at once
    3.times { assert_equal 200, HTTPClient.request(server.tcp, "/fast").status }
    # served while the slow head is still pending: before its 408 (2 s)
    assert_operator now - t, :<, 1.9
    res = HTTPClient.read_response(slow, timeout: 5)
    assert_equal 408, res.status
    assert_equal "close", res["connection"]
    assert HTTPClient.closed?(slow)
  end

  def test_trickled_head_still_times_out
    slow = server.tcp
    t = now
    "GET / HTTP/1.1\r\nHost: t\r\nX-A: bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb".each_char do |c|
      slow.write(c)
      break if slow.wait_readable(0.05) # the 408 arrived
    end
    res = HTTPClient.read_response(slow, timeout: 5)
    assert_equal 408, res.status
    assert_operator now - t, :>=, 1.9, "408 before the header timeout"
  rescue Errno::EPIPE, Errno::ECONNRESET
    flunk "connection dropped without a 408"
  end

  def test_connection_that_sends_nothing_is_closed_silently
    s = server.tcp
    assert HTTPClient.closed?(s, timeout: 5)
    s2 = server.tcp
    assert_nil HTTPClient.read_response(s2, timeout: 5)
  end

  def test_stalled_body_gets_408
    s = server.tcp
    s.write("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc")
    assert_equal 408, HTTPClient.read_response(s, timeout: 5).status
  end
end

class NoKeepaliveTest < Minitest::Test
  include SharedServer
  server "echo.ru", "--no-keepalive"

  def test_every_response_closes
    server.each_transport do |_, open|
      s = open.call
      s.write("GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n")
      res = HTTPClient.read_response(s)
      assert_equal 200, res.status
      assert_equal "close", res["connection"]
      assert HTTPClient.closed?(s)
    end
  end
end
