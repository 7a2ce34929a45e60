# frozen_string_literal: true

require "test_helper"

# worker_timeout is Puma's: a worker that has not checked in with the
# master for that long is hung and killed; a request is never timed by it.
# A Puma config's `worker_timeout 60` took Oribi's request deadline and
# killed a worker 61 s into a 65 s upload, and every WebSocket on it.
# (Oribi's own deadline on a request is request_timeout: restart_test.)
class WorkerTimeoutTest < Minitest::Test
  def puma_server(text)
    @dir = Dir.mktmpdir("oribi-worker-timeout")
    conf = File.join(@dir, "puma.rb")
    File.write(conf, text)
    ServerProcess.new("slow.ru", "-C", conf, workers: nil, unix: false, env: { "WEB_CONCURRENCY" => nil })
  end

  def teardown
    FileUtils.rm_rf(@dir) if @dir
  end

  # Requests longer than worker_timeout answer, sleeping or computing in
  # Ruby; a stopped worker (as one stuck in C with the GVL held: it never
  # checks in) is killed and replaced.
  def test_a_long_request_answers_and_a_hung_worker_is_killed
    srv = puma_server("workers 1\nworker_timeout 2\n")
    assert wait_until(timeout: 10) { srv.worker_pids.size == 1 }
    worker = srv.worker_pids.first
    %w[sleep spin].each do |how|
      t = now
      res = HTTPClient.request(srv.tcp, "/?#{how}=4", headers: { "Connection" => "close" })
      assert_equal 200, res&.status, "#{how} 4 s with worker_timeout 2:\n#{srv.log}"
      assert_operator now - t, :>=, 4
    end
    assert_equal [worker], srv.worker_pids
    refute_match(/killing it/, srv.log)

    Process.kill(:STOP, worker)
    stopped = now
    assert_match(/worker\[0\] pid #{worker} has not checked in for \d+\.\d s \(worker_timeout 2(\.0)? s: hung\): killing it/,
                 srv.log_until(/killing it/, timeout: 15))
    assert_operator now - stopped, :<, 6
    assert wait_until(timeout: 10) { srv.worker_pids.size == 1 && srv.worker_pids != [worker] }, srv.log
    assert_equal 200, HTTPClient.request(srv.tcp, "/").status
  ensure
    Process.kill(:CONT, worker) if worker && process_alive?(worker)
    srv&.stop
  end
end
