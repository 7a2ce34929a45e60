# frozen_string_literal: true

require "test_helper"

# A worker holding max_connections closes its oldest idle keep-alive or
# incomplete-head connection to take a new one (docs/HARDENING.md), so that
# connections that send nothing cannot make a client wait for the header
# timeout. One worker, 16 connections at most, timeouts far longer than any
# bound asserted here.
class ConnectionSheddingTest < Minitest::Test
  MAX = 16
  GET = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"

  def with_server(app, *args)
    server = ServerProcess.new(app, "--max-connections", MAX.to_s, "--header-timeout", "30",
                               "--keepalive-timeout", "30", *args, workers: 1)
    yield server
  ensure
    server&.stop
  end

  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)


  # An idle keep-alive connection, then 40 that hold a slot without a
  # request (silent on unix; one byte over TCP, which TCP_DEFER_ACCEPT
  # needs to pass them on), then a normal client: answered at once, and the
  # 26 oldest (the idle one first) were closed for it and the rest.
  def test_oldest_idle_and_incomplete_connections_are_shed_for_a_new_client
    %i[tcp unix].each do |name|
      # a server each: the worker starts empty, or the oldest would be the last transport's
      with_server("echo.ru") do |server|
        connect = server.method(name)
        idle = connect.call
        assert_equal 200, HTTPClient.request(idle, "/").status
        attackers = Array.new(40) { connect.call.tap { |s| s.write("G") if name == :tcp } }
        started = monotonic
        client = connect.call
        client.write(GET)
        res = HTTPClient.read_response(client, timeout: 5)
        assert_equal 200, res&.status, "#{name}: the new client was not served"
        assert_operator monotonic - started, :<, 5, "#{name}: the new client waited"

        shed = [idle, *attackers.first(40 + 1 - MAX)]
        kept = attackers.last(MAX - 1)
        shed.each_with_index { |s, i| assert HTTPClient.closed?(s, timeout: 5), "#{name}: connection #{i} was not shed" }
        # the shedding that made room for the client is over: none of these is readable
        kept.each_with_index { |s, i| assert_nil s.wait_readable(0), "#{name}: connection #{i} of the newest was shed" }
        assert_match(/max_connections \(#{MAX}\) reached: closed 1 /, server.log_until(/max_connections/))
        [client, *shed, *kept].each(&:close)
      end
    end
  end

  # A request in the app and one whose body is half sent are never shed:
  # with four threads the loop runs (and sheds) while the app sleeps.
  def test_requests_in_the_app_or_mid_body_are_not_shed
    with_server("slow.ru", "--threads", "4") do |server|
      in_app = server.unix
      in_app.write("GET /?sleep=3 HTTP/1.1\r\nHost: a\r\n\r\n")
      server.log_until(/sleeping 3/)
      mid_body = server.unix
      mid_body.write("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n")
      continue = "HTTP/1.1 100 Continue\r\n\r\n"
      assert_equal continue, HTTPClient.read_bytes(mid_body, continue.bytesize, monotonic + 5), "the head was not taken"
      mid_body.write("12345")

      attackers = Array.new(40) { server.unix }
      client = server.unix
      client.write(GET)
      assert_equal 200, HTTPClient.read_response(client, timeout: 5)&.status, "the new client was not served"

      assert_equal 200, HTTPClient.read_response(in_app, timeout: 10)&.status, "the request in the app"
      mid_body.write("67890")
      assert_equal 200, HTTPClient.read_response(mid_body, timeout: 5)&.status, "the request mid-body"
      [in_app, mid_body, client, *attackers].each(&:close)
    end
  end
end
