# frozen_string_literal: true

require "test_helper"

# New connections are clients in the same round as the kept-alive ones: a
# burst of them, queued in the backlog while every worker is busy with
# keep-alive clients, is answered within about one round of those clients
# (every client served once), not one new connection per round per worker;
# and the kept-alive clients are not starved by the newcomers either.
class FairnessTest < Minitest::Test
  APP_SECS = 0.05
  KEEPALIVE = 10
  BURST = 20

  def test_a_burst_of_new_connections_joins_the_round_of_the_kept_alive_ones
    srv = ServerProcess.new("slow.ru", workers: 2)
    stop = false
    waits = Queue.new # the keep-alive clients' latencies once the burst came
    burst_sent = nil
    keepalive = KEEPALIVE.times.map do
      s = srv.unix
      Thread.new do
        until stop
          t = now
          s.write("GET /?sleep=#{APP_SECS} HTTP/1.1\r\nHost: t\r\n\r\n")
          assert_equal 200, HTTPClient.read_response(s, timeout: 20).status
          waits << now - t if burst_sent && t > burst_sent
        end
      ensure
        s.close
      end
    end
    assert wait_until { srv.log.scan("sleeping").size >= 2 * KEEPALIVE }, "keep-alive clients not served"
    burst_sent = now
    burst = Array.new(BURST) { srv.unix.tap { |s| s.write("GET /?sleep=#{APP_SECS} HTTP/1.1\r\nHost: t\r\n\r\n") } }
    firsts = burst.map do |s|
      assert_equal 200, HTTPClient.read_response(s, timeout: 20).status
      now - burst_sent
    ensure
      s.close
    end
    stop = true
    keepalive.each(&:join)
    # A round once the burst has joined: every client, split over 2 workers.
    round = (KEEPALIVE + BURST) / 2 * APP_SECS
    # One new connection per round per worker would take about BURST / 2
    # rounds for the last one; in the same round, it is about one.
    assert_operator firsts.max, :<, 2 * round, "new connections waited #{firsts.map { |f| f.round(2) }}"
    assert_operator waits.size, :>, 0
    worst = Array.new(waits.size) { waits.pop }.max
    assert_operator worst, :<, 2 * round, "a keep-alive client waited #{worst.round(2)} s meanwhile"
  ensure
    stop = true
    srv&.stop
  end
end
