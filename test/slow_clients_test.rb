# frozen_string_literal: true

require "test_helper"
require_relative "../bench/slow_clients"

# 500 connections trickling their head or their body a byte at a time and
# 500 idle keep-alive connections on one worker, while a normal client
# sends 100 GETs per second (open loop): it is served every time with p99
# under 100 ms, every trickling connection gets 408 at its timeout, and the
# idle connections are still served afterwards. bench/slow_clients.rb runs
# the same scenario at any size.
class SlowClientsTest < Minitest::Test
  TRICKLE = 500
  IDLE = 500
  TIMEOUT = 3.0
  RATE = 100
  DURATION = 2.5

  def setup
    soft, hard = Process.getrlimit(:NOFILE)
    need = TRICKLE + IDLE + 300
    skip "needs #{need} fds, the hard limit is #{hard}" if hard < need
    Process.setrlimit(:NOFILE, need, hard) if soft < need # the hard limit stays
    # the server also holds a tmpfile per body trickler
    @server = ServerProcess.new(File.join(ROOT, "bench/apps/hello.ru"), "--max-connections", "4096",
                                "--header-timeout", TIMEOUT.to_s, "--body-timeout", TIMEOUT.to_s,
                                workers: 1, unix: false, spawn: { rlimit_nofile: [[need + TRICKLE, hard].min, hard] })
  end

  def teardown
    @server&.stop
  end

  def scenario(trickle: TRICKLE, idle: IDLE)
    Timeout.timeout(60) do
      SlowClients.run({ host: "127.0.0.1", port: @server.port }, trickle: trickle, idle: idle,
                                                                rate: RATE, duration: DURATION, timeout: TIMEOUT)
    end
  end

  def p99(r) = r[:load][:latency][:p99].to_i

  # The normal client's marks: p99 under 100 ms and (open loop) nearly every
  # scheduled request sent. A load generator starved of CPU sends fewer.
  def missed?(r) = p99(r) >= 100_000 || r[:load][:requests] < (RATE * DURATION * 0.95).floor

  def test_slow_clients_do_not_hold_up_a_normal_client
    assert wait_until(timeout: 10) { @server.worker_pids.any? }, "no worker" # forked after the master listens
    worker = @server.worker_pids
    r = scenario
    # The machine is shared: two reruns when the normal client missed a mark
    # (a server that stalls behind slow clients misses them every time; on
    # a busy 2-core machine a good one missed the tail in 1 run of 3 of the
    # whole scenario, up to 200 ms, with builds from before and after the
    # same change, and the count with CI's chroots building beside it: 204
    # of 250 sent, p99 51 ms), and a visible skip when the normal client
    # alone misses them too: then the machine, not the server, is what was
    # measured.
    2.times { r = scenario if missed?(r) }
    if missed?(r) && missed?(baseline = scenario(trickle: 0, idle: 0))
      skip "machine too loaded to measure: without any slow client #{baseline[:load][:requests]} requests sent, " \
           "p99 #{p99(baseline) / 1000} ms (with them #{r[:load][:requests]}, #{p99(r) / 1000} ms)"
    end
    report = SlowClients.report(r, TIMEOUT)
    load = r[:load]
    assert_equal 0, load[:errors].values.sum, report
    assert_equal({ 200 => load[:requests] }, load[:status], report)
    assert_operator load[:requests], :>=, (RATE * DURATION * 0.95).floor, report
    assert_operator load[:latency][:p99], :<, 100_000, report

    r[:tricklers].each do |t|
      assert_equal 408, t.status, "#{t.kind} trickler: #{report}"
      cut = t.answered_at - t.started
      assert_operator cut, :>=, TIMEOUT - 0.2, "#{t.kind} trickler cut early: #{report}"
      assert_operator cut, :<=, TIMEOUT + 3, "#{t.kind} trickler cut late: #{report}"
    end
    assert_equal IDLE, r[:idle_ok], report
    assert_equal worker, @server.worker_pids, "the worker was replaced"
  end
end
