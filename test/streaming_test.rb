# frozen_string_literal: true

require "rack3_helper"

# Streaming bodies (Rack 3: the body responds to call, not each): the head
# goes out, body.call(stream) writes the rest, then the connection closes.
class StreamingTest < Minitest::Test
  include SharedServer
  server "rack3.ru", env: Rack3Files.server_env

  def test_stream_head_and_close_delimited_body
    server.each_transport do |name, open|
      s = open.call
      res = HTTPClient.request(s, "/stream")
      assert_equal 200, res.status
      assert_equal "hello world", res.body, name
      assert_equal "close", res["connection"]
      assert_nil res["content-length"]
      assert_nil res["transfer-encoding"]
      assert_equal "text/plain", res["content-type"]
      assert HTTPClient.closed?(s)
      s.close
    end
  end

  def test_stream_with_the_apps_content_length
    s = server.tcp
    res = HTTPClient.request(s, "/stream-length")
    assert_equal "11", res["content-length"]
    assert_equal "hello world", res.body
    assert_equal "close", res["connection"]
    assert HTTPClient.closed?(s)
  ensure
    s&.close
  end

  def test_http10_stream
    s = server.tcp
    s.write("GET /stream HTTP/1.0\r\n\r\n")
    res = HTTPClient.read_response(s)
    assert_equal "hello world", res.body
    assert HTTPClient.closed?(s)
  ensure
    s&.close
  end

  def test_head_does_not_call_the_stream_and_keeps_the_connection
    s = server.tcp
    s.write("HEAD /stream?tag=head HTTP/1.1\r\nHost: t\r\n\r\n")
    res = HTTPClient.read_response(s, head: true)
    assert_equal 200, res.status
    assert_nil res["connection"]
    assert_equal 200, HTTPClient.request(s, "/pid").status, "still in sync"
    refute_match(/stream called HEAD/, server.log)
  ensure
    s&.close
  end

  def test_stream_reads_what_the_client_sends_after_the_request
    server.each_transport do |name, open|
      s = open.call
      s.write("GET /stream-echo HTTP/1.1\r\nHost: t\r\n\r\nping") # already buffered by the server
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
      head = +""
      head << HTTPClient.read_line(s, deadline) until head.end_with?("\r\n\r\n")
      assert_equal "got ping;", HTTPClient.read_bytes(s, 9, deadline), name
      s.write("pong") # read from the socket this time
      assert_equal "got pong;", HTTPClient.read_bytes(s, 9, deadline)
      assert HTTPClient.closed?(s)
      s.close
    end
  end

  def test_close_write_ends_the_body_and_closed_stream_refuses_writes
    s = server.tcp
    res = HTTPClient.request(s, "/stream-close")
    assert_equal "a", res.body
    assert_match(/stream closed\? false true write after close: IOError/, server.log_until(/stream closed\?/))
  ensure
    s&.close
  end

  def test_stream_that_raises_closes_the_connection_and_is_logged
    s = server.tcp
    s.write("GET /stream-raise HTTP/1.1\r\nHost: t\r\n\r\n")
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    data = +""
    while (c = HTTPClient.read_some(s, 4096, deadline))
      data << c
    end
    assert_match(/\AHTTP\/1.1 200 OK\r\n/, data)
    assert data.end_with?("\r\n\r\npartial"), data
    assert_match(/response failed: RuntimeError: stream failed/, server.log_until(/stream failed/))
  ensure
    s&.close
  end

  def test_client_leaving_a_stream_is_not_an_app_error
    s = server.tcp
    s.write("GET /stream-forever?log=1 HTTP/1.1\r\nHost: t\r\n\r\n")
    s.readpartial(1024)
    s.close
    log = server.log_until(%r{finished log /stream-forever})
    assert_match(%r{finished log /stream-forever 200 Errno::EPIPE}, log)
    refute_match(/response failed: Errno/, log)
    assert_equal 200, HTTPClient.request(server.tcp, "/pid").status
  end
end
