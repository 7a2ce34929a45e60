# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../../lib", __dir__))
require "minitest/autorun"
require "oribi/loadgen"
require "socket"
require "timeout"

# Coordinated omission: a server that stalls once for 1 s. An open-loop run
# keeps sending on schedule and times each request from when it was due, so
# the stall fills the tail; a closed loop waits it out on its connections
# and sees it only as the maximum.
class BenchOpenLoopTest < Minitest::Test
  REQUEST = "GET / HTTP/1.1\r\nHost: t\r\n\r\n"
  STALL = 1.0

  # Keep-alive server on threads of this process; request number stall_at
  # (counted over all connections) holds every response back for STALL.
  class StallServer
    attr_reader :port

    def initialize(stall_at)
      @server = TCPServer.new("127.0.0.1", 0)
      @port = @server.addr[1]
      @gate = Mutex.new
      @count = 0
      @stall_at = stall_at
      @threads = []
      @acceptor = Thread.new do
        loop { @threads << Thread.new(@server.accept) { |s| serve(s) } }
      rescue IOError
        nil
      end
    end

    def serve(sock)
      loop do
        buf = +""
        buf << sock.readpartial(4096) until buf.include?("\r\n\r\n")
        n = @gate.synchronize { @count += 1 }
        # The stall is the thing under test, not a synchronisation.
        @gate.synchronize { sleep STALL } if n == @stall_at
        @gate.synchronize { nil } # every request waits while the gate is held
        sock.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
      end
    rescue IOError, SystemCallError
      sock.close
    end

    def close
      @server.close
      @acceptor.join(2)
      @threads.each { |t| t.kill.join(2) }
    end
  end

  def run_against(stall_at, **opts)
    server = StallServer.new(stall_at)
    Timeout.timeout(15) do
      Oribi::Loadgen.run({ host: "127.0.0.1", port: server.port, request: REQUEST,
                           threads: 1, timeout: 5 }.merge(opts))
    end
  ensure
    server&.close
  end

  def test_stall_fills_the_open_loop_tail_but_only_the_closed_loop_max
    # 100/s for 4 s, stall at ~1 s: about a quarter of the requests are due
    # during the stall, their latencies spread from 0 to 1 s.
    open = run_against(100, rate: 100, duration: 4, max_connections: 200, series_interval: 0.5)
    lat = open[:latency]
    assert_operator open[:requests], :>=, 390, open.inspect
    assert_equal 0, open[:errors].values.sum
    assert_operator lat[:p99], :>=, 800_000, "open loop p99 (µs) must show the stall"
    assert_operator lat[:p90], :>=, 200_000
    assert_operator lat[:max], :>=, 950_000
    # A send due just before the deadline may miss it on a busy machine:
    # it is dropped, and said so, not lost.
    assert_operator open[:dropped], :<=, 2
    assert_equal open[:scheduled], open[:sent] + open[:dropped]
    # Over time: quick before the stall, the stall in the interval it began.
    p99s = open[:series].map { |x| x[:p99] }
    assert_operator p99s.first, :<, 500_000, p99s.inspect
    assert_operator p99s.compact.max, :>=, 800_000, p99s.inspect

    # A count, not a duration: a busy machine slows the run down but the
    # stall stays one request in 400, above p99.
    closed = run_against(100, connections: 1, requests: 400)
    lat = closed[:latency]
    assert_equal 400, closed[:requests], closed.inspect
    assert_operator lat[:max], :>=, 950_000, "closed loop sees the stall as its max"
    assert_operator lat[:p99], :<, 100_000, "closed loop hides it from the percentiles"
  end

  def test_sends_behind_schedule_are_late_and_still_timed_from_schedule
    # One connection: the sends due during the stall wait for it, go out
    # late, and their latency still counts from when they were due.
    r = run_against(50, rate: 100, duration: 2, max_connections: 1)
    assert_operator r[:late], :>=, 80, r.inspect
    assert_operator r[:latency][:p90], :>=, 300_000
    assert_operator r[:latency][:max], :>=, 950_000
  end

  def test_responses_in_flight_at_the_deadline_are_counted
    # 50/s for 2 s, the stall from ~1.6 s to ~2.6 s: the last 20 requests
    # are answered after the deadline, each 0.6 to 1 s late. They are the
    # tail, not missing from it.
    r = run_against(80, rate: 50, duration: 2, max_connections: 100)
    assert_equal 100, r[:scheduled], r.inspect
    assert_equal 100, r[:requests] + r[:errors].values.sum + r[:dropped], r.inspect
    assert_equal 0, r[:errors].values.sum
    assert_operator r[:requests], :>=, 95
    assert_operator r[:latency][:p99], :>=, 800_000
    assert_operator r[:latency][:max], :>=, 950_000
    assert_operator r[:elapsed], :>=, 2.5, "the wait for the last responses is part of the run"
  end

  def test_requests_timing_out_after_the_deadline_are_errors_with_their_latency
    r = run_against(80, rate: 50, duration: 2, max_connections: 100, timeout: 0.4)
    assert_operator r[:errors][:timeout], :>=, 10, r.inspect
    assert_equal 100, r[:requests] + r[:errors].values.sum + r[:dropped], r.inspect
    assert_operator r[:latency][:max], :>=, 400_000, "timeouts are in the latencies"
    assert_operator r[:elapsed], :<, 2.9, "no wait past --timeout"
  end

  def test_scheduled_is_sent_plus_dropped
    # One connection and a rate it cannot carry (5 µs a round trip to a
    # Ruby server; at 20,000/s a quiet machine carried it all): most sends
    # never happen, and the report must say so however the run ends.
    r = run_against(0, rate: 200_000, duration: 1, max_connections: 1)
    assert_equal 200_000, r[:scheduled], r.inspect
    assert_equal r[:scheduled], r[:sent] + r[:dropped], r.inspect
    assert_equal r[:sent], r[:requests] + r[:errors].values.sum, r.inspect
    assert_operator r[:dropped], :>, 0
    assert_includes 0.0..1.1, r[:busy], "CPU over wall time of the busiest thread"
  end

  def test_sends_never_made_are_dropped
    # The whole run stalls behind one request: what was due is dropped,
    # and the stalled request itself is awaited past the deadline.
    r = run_against(1, rate: 200, duration: 0.5, max_connections: 1)
    assert_operator r[:dropped], :>=, 90, r.inspect
    assert_equal 1, r[:requests]
    assert_equal 100, r[:scheduled]
    assert_operator r[:latency][:max], :>=, 950_000
  end
end
