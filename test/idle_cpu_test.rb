# frozen_string_literal: true

require "test_helper"

# busy_poll: a worker polls a little before it sleeps while its waits end
# that soon (ext/oribi/loop/spin.c), which spares it the wake-ups under
# load; once the load goes it sleeps, with kept-alive clients still open
# and without: an idle server burns no CPU.
class IdleCpuTest < Minitest::Test
  REQUEST = "GET / HTTP/1.1\r\nHost: t\r\n\r\n"
  REQUESTS = 500

  def teardown
    @srv&.stop
  end

  # One client, one request after the other on one connection: without
  # busy_poll the worker sleeps between any two (a voluntary context
  # switch each); with it, the next request comes while it polls.
  def test_a_worker_under_load_polls_instead_of_sleeping
    @srv = ServerProcess.new("echo.ru", "--busy-poll", "1000", workers: 1)
    assert wait_until { @srv.worker_pids.size == 1 }, "worker not up"
    pid = @srv.worker_pids.first
    s = @srv.unix
    exchange(s, 50) # the budget grows with the first short waits
    before = switches(pid)
    exchange(s, REQUESTS)
    slept = switches(pid) - before
    assert_operator slept, :<, REQUESTS * 0.7, "the worker slept #{slept} times in #{REQUESTS} requests"
  end

  def test_a_worker_sleeps_once_the_load_is_gone
    @srv = ServerProcess.new("echo.ru", "--busy-poll", "1000", workers: 2)
    assert wait_until { @srv.worker_pids.size == 2 }, "workers not up"
    kept = Array.new(4) { Thread.new { @srv.unix.tap { |s| exchange(s, REQUESTS) } } }.map(&:value)
    [kept, []].each do |open|
      busy = cpu(@srv)
      sleep 1 # the span measured, not a wait for a condition
      spent = cpu(@srv) - busy
      assert_operator spent, :<, 0.05,
                      "#{@srv.worker_pids.size} idle workers (#{open.size} kept-alive clients open) " \
                      "used #{(spent * 1000).round} ms of CPU in a second"
      kept.each(&:close)
    end
  end

  private

  def exchange(sock, n)
    n.times do
      sock.write(REQUEST)
      assert_equal 200, HTTPClient.read_response(sock).status
    end
  end

  def switches(pid) = File.read("/proc/#{pid}/status")[/^voluntary_ctxt_switches:\s+(\d+)/, 1].to_i

  def cpu(srv) = srv.worker_pids.sum { |pid| srv.cpu_seconds(pid) }
end
