# frozen_string_literal: true

require "test_helper"

# -t N: a pool of app threads per worker, fed by the worker's C loop
# (docs/THREADS.md). Real server processes; rates are coarse functional
# bounds with wide margins (the box is shared), measured in bench/threads.rb.
class ThreadsTest < Minitest::Test

  def closed_loop_rate(srv, path, connections:, duration: 2)
    req = "GET #{path} HTTP/1.1\r\nHost: t\r\n\r\n"
    res = Timeout.timeout(duration + 20) do
      Oribi::Loadgen.run({ request: req, threads: 1, connections: connections, duration: duration,
                           timeout: 5, unix_path: srv.sock })
    end
    assert_equal 0, res[:errors].values.sum, res[:errors].inspect
    res[:requests] / res[:elapsed]
  end

  # An IO-bound app (10 ms sleep): 4 threads serve about 4 times the
  # requests of one.
  def test_io_bound_app_scales_with_threads
    rates = [1, 4].to_h do |t|
      srv = ServerProcess.new("threads.ru", "-t", t.to_s, workers: 1, tcp: false)
      closed_loop_rate(srv, "/?sleep=0.01", connections: 8, duration: 0.5) # warm-up
      [t, closed_loop_rate(srv, "/?sleep=0.01", connections: 8)]
    ensure
      srv&.stop
    end
    assert_operator rates[1], :<, 110, "one thread cannot beat 100 req/s of 10 ms: #{rates}"
    # Under ThreadSanitizer (rake test:tsan_ruby) each access of ours costs
    # many times its own: the ratio measures the sanitizer there.
    return if ENV["ORIBI_SANITIZE"] == "thread"

    assert(rates[4] >= 2.5 * rates[1] || rates[4] >= 0.6 * 400, "4 threads: #{rates}")
  end

  def test_a_slow_request_does_not_block_the_other_threads
    srv = ServerProcess.new("threads.ru", "-t", "4", workers: 1)
    slow, = srv.send_gets(["/?sleep=2"])
    assert wait_until { srv.log.include?("sleeping 2.0") }
    5.times do |i|
      t = now
      res = HTTPClient.request(srv.tcp, "/quick#{i}", headers: { "Connection" => "close" })
      assert_equal "/quick#{i} slept 0.0\n", res.body
      assert_operator now - t, :<, 0.5
    end
    res = HTTPClient.read_response(slow, timeout: 10)
    assert_equal "/ slept 2.0\n", res.body
  ensure
    srv&.stop
  end

  def test_term_waits_for_the_requests_of_every_thread
    srv = ServerProcess.new("threads.ru", "-t", "4", workers: 2)
    clients = srv.send_gets(12.times.map { |i| "/c#{i}?sleep=0.5" })
    # eight in the app (two workers, four threads each), four in the backlog
    assert wait_until { srv.log.scan("sleeping").size >= 8 }, srv.log
    Process.kill(:TERM, srv.pid)
    bodies = clients.map { |s| HTTPClient.read_response(s, timeout: 15)&.body }
    assert_equal 12.times.map { |i| "/c#{i} slept 0.5\n" }, bodies
    status = srv.wait_exit(10)
    assert status&.success?, "exit status #{status.inspect}"
  ensure
    srv&.stop
  end

  def test_rack_multithread_says_whether_threads_share_the_app
    { 1 => "false", 4 => "true" }.each do |t, flag|
      srv = ServerProcess.new("threads.ru", "-t", t.to_s, workers: 0)
      assert_equal "multithread=#{flag}", HTTPClient.request(srv.tcp, "/flags").body
    ensure
      srv&.stop
    end
  end

  # Each connection has one request in the app at a time: pipelined
  # requests are answered in order even when an earlier one is slower.
  def test_pipelined_and_keepalive_requests_keep_their_order
    srv = ServerProcess.new("threads.ru", "-t", "4", workers: 1)
    conns = 3.times.map do |k|
      s = srv.tcp
      s.write(%w[0.2 0 0.1 0].each_with_index.map { |d, i| "GET /p#{k}-#{i}?sleep=#{d} HTTP/1.1\r\nHost: t\r\n\r\n" }.join)
      s
    end
    conns.each_with_index do |s, k|
      bodies = 4.times.map { HTTPClient.read_response(s, timeout: 10).body[/\S+/] }
      assert_equal 4.times.map { |i| "/p#{k}-#{i}" }, bodies
      # and the connection stays usable
      assert_equal "/again#{k}", HTTPClient.request(s, "/again#{k}").body[/\S+/]
    end
  ensure
    srv&.stop
  end

  def test_streaming_and_hijack_run_side_by_side
    srv = ServerProcess.new("threads.ru", "-t", "4", workers: 1)
    paths = %w[/stream /hijack] * 3
    paths.zip(srv.send_gets(paths)).each do |path, s|
      res = HTTPClient.read_response(s, timeout: 10)
      assert_equal 200, res.status
      assert_equal(path == "/stream" ? "part0\npart1\npart2\n" : "hijack\n", res.body)
      assert HTTPClient.closed?(s)
    end
  ensure
    srv&.stop
  end

  def test_soft_timeout_reports_each_thread
    srv = ServerProcess.new("threads.ru", "-t", "2", "--soft-timeout", "0.3", workers: 1)
    socks = srv.send_gets(%w[/one?sleep=2 /two?sleep=2])
    # Side by side: both are in the app before either is answered (one
    # after the other, the second starts once the first is out).
    both = srv.log_until(%r{sleeping 2\.0 /(one|two).*sleeping 2\.0 /(one|two)}m, timeout: 10)
    assert_match(%r{sleeping 2\.0 /(one|two).*sleeping 2\.0 /(one|two)}m, both)
    assert_nil IO.select(socks, nil, nil, 0), "a request was answered before the other began"
    socks.each { |s| assert_equal 200, HTTPClient.read_response(s, timeout: 10).status }
    log = srv.log_until(%r{soft_timeout: GET /two.*soft_timeout: GET /one|soft_timeout: GET /one.*soft_timeout: GET /two}m)
    assert_match(%r{soft_timeout: GET /one\?sleep=2 running}, log)
    assert_match(%r{soft_timeout: GET /two\?sleep=2 running}, log)
  ensure
    srv&.stop
  end

  # The hard timeout looks at the oldest request in the app: a worker whose
  # threads are always busy with short, overlapping requests is not stuck.
  def test_hard_timeout_counts_from_the_oldest_request_not_from_the_first
    srv = ServerProcess.new("threads.ru", "-t", "2", "--request-timeout", "1", workers: 1)
    assert wait_until { srv.worker_pids.size == 1 }
    pids = srv.worker_pids
    deadline = now + 2.5
    2.times.map do |k|
      Thread.new do
        s = srv.tcp
        i = 0
        while now < deadline
          # staggered: one thread is always in the app
          s.write("GET /o#{k}-#{i}?sleep=#{k.zero? ? 0.4 : 0.3} HTTP/1.1\r\nHost: t\r\n\r\n")
          HTTPClient.read_response(s, timeout: 5)
          i += 1
        end
      end
    end.each(&:join)
    refute_match(/stuck/, srv.log)
    assert_equal pids, srv.worker_pids
    stuck, = srv.send_gets(["/?sleep=30"])
    assert_match(/stuck \d+\.\d s on "GET \/"/, srv.log_until(/stuck/, timeout: 10)) # no query: it may hold secrets
  ensure
    stuck&.close
    srv&.stop
  end

  # Two requests that go to the app in the same millisecond: when the
  # first ends, the worker is busy with the second, and the stuck-worker
  # line names that one.
  def test_the_stuck_line_names_the_request_still_in_the_app
    srv = ServerProcess.new("threads.ru", "-t", "2", "--request-timeout", "1", workers: 1)
    assert wait_until { srv.worker_pids.size == 1 }
    s = srv.tcp
    # two connections the loop reads in one go and hands out together
    s.write("GET /quick HTTP/1.1\r\nHost: t\r\n\r\n")
    t = srv.tcp
    t.write("GET /stuck?sleep=30 HTTP/1.1\r\nHost: t\r\n\r\n")
    assert_equal 200, HTTPClient.read_response(s).status
    assert_match(%r{stuck \d+\.\d s on "GET /stuck"}, srv.log_until(/stuck \d/, timeout: 10))
  ensure
    s&.close
    t&.close
    srv&.stop
  end
end
