# frozen_string_literal: true

require "test_helper"

# Workers notice their master's death, however it died (kill -9, the OOM
# killer): they close their listeners at once, finish what is in flight and
# exit, so that a server started in their place binds the same paths and
# nothing serves old code unsupervised.
class SupervisionTest < Minitest::Test
  def test_workers_of_a_killed_master_finish_in_flight_requests_and_exit
    srv = ServerProcess.new("slow.ru", workers: 2)
    assert wait_until { srv.worker_pids.size == 2 }
    workers = srv.worker_pids
    s = srv.unix
    s.write("GET /?sleep=0.5 HTTP/1.1\r\nHost: t\r\n\r\n")
    assert wait_until { srv.log.include?("sleeping") }
    Process.kill(:KILL, srv.pid)
    res = HTTPClient.read_response(s)
    assert_equal 200, res.status
    assert_equal "close", res["connection"]
    assert wait_until(timeout: 5) { workers.none? { |w| process_alive?(w) } }, "orphaned workers still run"
    assert_match(/the master \(pid #{srv.pid}\) is gone; draining and exiting/, srv.log)
  ensure
    srv&.stop
  end

  def test_a_new_server_starts_on_the_same_paths_within_a_second_of_the_masters_death
    old = ServerProcess.new("env.ru", workers: 2)
    assert wait_until { old.worker_pids.size == 2 }
    workers = old.worker_pids
    Process.kill(:KILL, old.pid)
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    assert wait_until(timeout: 5) { workers.none? { |w| process_alive?(w) } }, "orphaned workers still run"
    gone = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t
    assert_operator gone, :<, 1.0, "the workers took #{gone.round(2)} s to exit"
    fresh = ServerProcess.new("env.ru", workers: 2, sock: old.sock, port: old.port)
    fresh.each_transport do |_name, connect|
      res = HTTPClient.request(connect.call, "/", headers: { "Connection" => "close" })
      assert_equal 200, res.status
      refute_includes workers, res.body.split[1].to_i
    end
  ensure
    old&.stop
    fresh&.stop
  end

  def test_under_start_server_the_orphans_of_a_killed_master_never_serve_the_next_generations_clients
    skip "start_server not installed (Debian libserver-starter-perl)" unless system("which start_server > /dev/null")
    Dir.mktmpdir do |d|
      port = free_port
      log = File.join(d, "log")
      starter = Oribi::ProcessGroup.new(["start_server", "--port=127.0.0.1:#{port}", "--interval=1", "--",
                                         RbConfig.ruby, File.join(ROOT, "exe/oribi"), "-w", "2", File.join(APPS, "env.ru")],
                                        log: log)
      get = lambda do
        HTTPClient.request(TCPSocket.new("127.0.0.1", port), "/", headers: { "Connection" => "close" })
      rescue SystemCallError, EOFError
        nil
      end
      assert wait_until(timeout: 20) { get.call&.status == 200 }, File.read(log)
      master = File.read("/proc/#{get.call.body.split[1]}/stat").split[3].to_i
      orphans = Oribi::Tune::Resources.children(master)
      Process.kill(:KILL, master)
      assert wait_until(timeout: 20) { File.read(log).scan("starting new worker").size >= 2 }, File.read(log)
      # the next generation is ready once it answers
      assert wait_until(timeout: 20) { (pid = get.call&.body.to_s.split[1].to_i) && pid.positive? && !orphans.include?(pid) },
             File.read(log)
      served = Array.new(40) { get.call&.body.to_s.split[1].to_i }
      assert_empty served & orphans, "the dead master's workers served after the next generation came up\n#{File.read(log)}"
      refute_includes served, 0, "a request failed"
      assert wait_until(timeout: 5) { orphans.none? { |w| process_alive?(w) } }, File.read(log)
    ensure
      starter&.stop(timeout: 15) # and its generations' workers
    end
  end
end
