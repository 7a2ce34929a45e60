# frozen_string_literal: true

require "test_helper"
require "nginx_proxy"
require_relative "support/sse_timing"

# An each body's chunks go out as the app yields them, not when the body
# ends: Server-Sent Events, ActionController::Live and Sinatra's stream
# depend on it. The app stamps each event when it yields it; the client
# notes when it arrives.
class StreamedEachTest < Minitest::Test
  include SharedServer
  server "responses.ru"

  EVENTS = 4

  def sse(sock, version: "1.1")
    sock.write("GET /sse?n=#{EVENTS} HTTP/#{version}\r\nHost: t\r\n\r\n")
    SSETiming.read(sock)
  end

  def test_each_chunk_arrives_when_it_is_yielded
    server.each_transport do |name, open|
      s = open.call
      events, raw = sse(s)
      SSETiming.assert_streamed(self, events, EVENTS, name)
      assert_match(/\r\ntransfer-encoding: chunked\r\n/, raw)
      assert_equal events.map { |stamp, _| "data: #{stamp}\n\n" }.join, SSETiming.dechunk(raw)
      assert_equal 200, HTTPClient.request(s, "/cookies").status, "#{name}: still in sync"
      s.close
    end
  end

  def test_close_delimited_chunks_arrive_when_they_are_yielded
    s = server.tcp
    events, raw = sse(s, version: "1.0")
    SSETiming.assert_streamed(self, events, EVENTS, "HTTP/1.0")
    refute_match(/transfer-encoding/i, raw)
    assert HTTPClient.closed?(s)
  ensure
    s&.close
  end

  # nginx passes each chunk on as it reads it when it does not buffer.
  def test_behind_nginx_without_proxy_buffering
    skip "nginx is not installed" unless NginxProxy.available?
    proxy = NginxProxy.new(server.sock, location: "proxy_buffering off;")
    s = proxy.tcp
    events, raw = sse(s)
    SSETiming.assert_streamed(self, events, EVENTS, "behind nginx\n#{proxy.log}")
    assert_equal events.map { |stamp, _| "data: #{stamp}\n\n" }.join, SSETiming.dechunk(raw)
  ensure
    s&.close
    proxy&.stop
  end
end
