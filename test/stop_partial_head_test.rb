# frozen_string_literal: true

require "test_helper"

# A connection whose request head is not complete has no request in
# flight: a graceful stop (TERM) or a worker retired by a rolling (HUP) or
# hot (USR2) restart closes it after the short grace idle keep-alive
# connections get, never waits for its header_timeout. One such client used
# to keep a draining worker alive past shutdown_timeout (its 30 s header
# timer outlasts the 25 s default): the master killed it, logged requests
# still in flight (none were) and exited 3.
class StopPartialHeadTest < Minitest::Test
  PARTIAL = "GET / HTTP/1.1\r\nHost: a\r\nX-Slow: " # a head that never ends

  # One partial head per transport, each seen by the worker (its sockets
  # grew by them) before the test goes on.
  def hold_partial_heads(srv)
    worker = HTTPClient.request(srv.unix, "/").body[/\d+/].to_i
    before = socket_count(worker)
    held = [srv.tcp, srv.unix].each { |s| s.write(PARTIAL) }
    assert wait_until(timeout: 10) { socket_count(worker) >= before + 2 }, "the worker never took the connections"
    [worker, held]
  end

  def assert_closed_soon(held)
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    held.each { |s| assert HTTPClient.closed?(s, timeout: 10), "a partial head was kept" }
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t
    assert_operator took, :<, 8, "closed only after #{took.round(1)} s"
  end

  def test_term_closes_partial_heads_and_exits_0
    srv = ServerProcess.new("env.ru", "--shutdown-timeout", "15", workers: 1)
    _, held = hold_partial_heads(srv)
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    Process.kill(:TERM, srv.pid)
    status = srv.wait_exit(20)
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t
    assert status&.success?, "exit status #{status.inspect} after #{took.round(1)} s\n#{srv.log}"
    assert_operator took, :<, 8, "the drain waited for the partial heads"
    refute_match(/in flight/, srv.log)
    assert_closed_soon(held)
  ensure
    held&.each(&:close)
    srv&.stop
  end

  def test_rolling_restart_closes_partial_heads
    srv = ServerProcess.new("env.ru", "--shutdown-timeout", "15", "--rolling-interval", "0", workers: 1)
    worker, held = hold_partial_heads(srv)
    Process.kill(:HUP, srv.pid)
    assert_closed_soon(held)
    assert wait_until(timeout: 10) { !process_alive?(worker) }, "the old worker is still there"
    refute_match(/killed|in flight/, srv.log)
  ensure
    held&.each(&:close)
    srv&.stop
  end
end
