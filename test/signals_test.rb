# frozen_string_literal: true

require "test_helper"

# The master and its workers under the operator's signals (SIGNALS.md).
class SignalsTest < Minitest::Test
  def get_pid(srv)
    HTTPClient.request(srv.tcp, "/", headers: { "Connection" => "close" }).body.split[1].to_i
  end

  def test_term_drains_in_flight_requests_then_refuses_connections
    srv = ServerProcess.new("slow.ru", workers: 2)
    clients = srv.send_gets(["/?sleep=0.3"] * 20)
    # both workers are inside the app; the other 18 requests wait in the backlog
    assert wait_until { srv.log.scan("sleeping").size >= 2 }, srv.log
    Process.kill(:TERM, srv.pid)
    statuses = clients.map { |s| HTTPClient.read_response(s, timeout: 15)&.status }
    assert_equal [200] * 20, statuses
    status = srv.wait_exit(10)
    assert status&.success?, "exit status #{status.inspect}"
    assert_raises(Errno::ECONNREFUSED) { srv.tcp }
  ensure
    srv&.stop
  end

  # A worker that has not trapped its own signals yet acts on none: on
  # Ruby 3.3 and later a signal its master had not handled when it forked
  # reaches the new worker too, and a TERM, HUP or USR2 meant for the master
  # killed it (TTIN stopped it) before it could serve. A master stopping
  # while its workers boot then lost every queued connection. Sent here to
  # the booting worker directly, as the copy arrives: it boots, serves, and
  # is the same worker.
  def test_a_booting_worker_acts_on_no_signal
    srv = ServerProcess.new("slow_boot.ru", "--no-preload", workers: 1)
    assert wait_until { srv.log.include?("booting pid") }, srv.log
    worker = srv.worker_pids.first
    %i[TERM HUP USR2 USR1 TTIN].each { |sig| Process.kill(sig, worker) }
    s = srv.unix
    s.write("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    res = HTTPClient.read_response(s, timeout: 20)
    assert_equal "pid #{worker}\n", res&.body, srv.log
    refute_match(/failed|exited|killed/, srv.log)
  ensure
    srv&.stop
  end

  # The copy can also wait in the child, unhandled, until the child's
  # first thread makes Ruby look at its signals, when the worker's own
  # handlers are in: a USR2 sent to a master as it forked stopped the new
  # worker (after a USR2 whose new code failed to load, the master then
  # had no worker left and exited). Here a parent set up as the master is
  # (Signals) forks children that do what a worker does (Signals#reset,
  # their own trap, a thread) while another process sends it USR2 every
  # 0.2 ms: no child may see one. (Ruby 3.1 copies none; 3.4 copied 4-12
  # into 100 children.)
  FORKS_UNDER_SIGNALS = <<~'RUBY'
    require "oribi/signals"
    signals = Oribi::Signals.new(%w[TERM USR2 CHLD])
    seen_r, seen_w = IO.pipe
    storm = fork do
      signals.reset
      loop do
        Process.kill(:USR2, Process.ppid)
        sleep 0.0002 # without a pause Ruby 3.1's Process.wait could spin on them for ever
      end
    rescue Errno::ESRCH
      exit!(0)
    end
    100.times do
      child = fork do
        signals.reset
        trap("USR2") { seen_w.write("!") }
        Thread.new {}.join
        exit!(0)
      end
      Process.wait(child)
      signals.wait(0)
    end
    Process.kill(:KILL, storm)
    Process.wait(storm)
    seen_w.close
    puts "children saw #{seen_r.read.size} USR2 sent to their parent"
  RUBY

  def test_a_forked_child_keeps_no_signal_of_its_parent_for_later
    out, = run_command(RbConfig.ruby, "-I", File.join(ROOT, "lib"), "-e", FORKS_UNDER_SIGNALS, timeout: 60, merge: true)
    assert_equal "children saw 0 USR2 sent to their parent\n", out
  end

  def test_second_term_stops_at_once
    srv = ServerProcess.new("slow.ru", workers: 1)
    s = srv.tcp
    s.write("GET /?sleep=30 HTTP/1.1\r\nHost: t\r\n\r\n")
    assert wait_until { srv.log.include?("sleeping") }
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    Process.kill(:TERM, srv.pid)
    assert wait_until { srv.log.include?("draining") }
    Process.kill(:TERM, srv.pid)
    assert srv.wait_exit(10), "the master did not exit"
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - t, :<, 5
  ensure
    srv&.stop
  end

  def test_shutdown_timeout_kills_stragglers
    srv = ServerProcess.new("slow.ru", "--shutdown-timeout", "1", workers: 1)
    s = srv.tcp
    s.write("GET /?sleep=30 HTTP/1.1\r\nHost: t\r\n\r\n")
    assert wait_until { srv.log.include?("sleeping") }
    Process.kill(:TERM, srv.pid)
    status = srv.wait_exit(10)
    assert status, "the master did not exit"
    assert_equal 3, status.exitstatus, "a stop that lost requests is not a clean exit"
    assert_match(/shutdown_timeout \(1(\.0)? s\): killing worker\[0\] with requests still in flight/, srv.log)
  ensure
    srv&.stop
  end

  def test_ttin_and_ttou_change_the_worker_count
    srv = ServerProcess.new("env.ru", workers: 2)
    assert wait_until { srv.worker_pids.size == 2 }
    Process.kill(:TTIN, srv.pid)
    assert wait_until { srv.worker_pids.size == 3 }, "TTIN did not add a worker"
    # one at a time: the kernel merges a signal sent again before it is handled
    Process.kill(:TTOU, srv.pid)
    assert wait_until { srv.worker_pids.size == 2 }, "TTOU did not remove a worker"
    Process.kill(:TTOU, srv.pid)
    assert wait_until { srv.worker_pids.size == 1 }, "TTOU did not remove a worker"
    Process.kill(:TTOU, srv.pid) # never below one
    assert_equal 200, HTTPClient.request(srv.tcp, "/").status
    assert_equal 1, srv.worker_pids.size
    assert srv.stop.success?
  ensure
    srv&.stop
  end

  def test_killed_worker_is_replaced_within_a_second_under_load
    srv = ServerProcess.new("env.ru", workers: 2)
    assert wait_until { srv.worker_pids.size == 2 }
    stop = false
    errors = Queue.new
    served = Queue.new
    load = 4.times.map do
      Thread.new do
        until stop
          begin
            served << get_pid(srv)
          rescue StandardError => e
            errors << e
          end
        end
      end
    end
    assert wait_until { served.size > 50 }
    victim = srv.worker_pids.first
    Process.kill(:KILL, victim)
    # young, so taken for a crash: replaced after the first back-off (0.5 s)
    assert wait_until(timeout: 10) { (pids = srv.worker_pids).size == 2 && !pids.include?(victim) }, "not replaced"
    count = served.size
    assert wait_until { served.size > count + 50 }, "load stopped after the kill"
    stop = true
    load.each(&:join)
    # only requests the killed worker held at the moment can fail: one per client at most
    assert_operator errors.size, :<=, 4, errors.size.times.map { errors.pop.inspect }.join(", ")
    assert_match(/worker\[\d\] pid #{victim} killed by SIGKILL/, srv.log)
  ensure
    stop = true
    srv&.stop
  end

  def test_max_requests_recycles_workers_without_failing_a_request
    srv = ServerProcess.new("env.ru", "--max-requests", "15", workers: 2)
    pids = []
    s = srv.tcp
    120.times do |i|
      # keep-alive while the server keeps the connection, a new one when it says close
      s.write("GET /#{i} HTTP/1.1\r\nHost: t\r\n\r\n")
      res = HTTPClient.read_response(s)
      refute_nil res, -> { "request #{i} got no response; the server's log:\n#{srv.log}" }
      assert_equal 200, res.status
      pids << res.body.split[1].to_i
      if res["connection"] == "close"
        s.close
        s = srv.tcp
      end
    end
    assert_operator pids.uniq.size, :>=, 4, "workers were not recycled: #{pids.uniq}"
    assert_match(/served 15 requests \(limit 15\): recycling/, srv.log)
    refute_match(/exited with status|killed by/, srv.log)
  ensure
    srv&.stop
  end

  # The one worker at its limit drains (a client reading nothing of a
  # 30 MiB body holds it until write_timeout): its replacement serves
  # meanwhile, rather than once it exits.
  def test_max_requests_with_one_worker_replaces_it_while_it_drains
    srv = ServerProcess.new("leak.ru", "--max-requests", "2", workers: 1, unix: false)
    stalled = srv.tcp
    stalled.write("GET /?body=30 HTTP/1.1\r\nHost: t\r\n\r\n")
    assert wait_until { stalled.wait_readable(0) }, "the response began"
    res = HTTPClient.request(srv.tcp, "/")
    assert_equal [200, "close"], [res.status, res["connection"]]
    old = res.body[/pid (\d+)/, 1].to_i
    assert_replaced_while_it_drains(srv, old, stalled)
    refute_match(/exited with status|killed by/, srv.log)
  ensure
    stalled&.close
    srv&.stop
  end

  def test_workers_that_cannot_boot_make_the_master_give_up
    Dir.mktmpdir do |d|
      File.write(File.join(d, "boom.ru"), "raise 'cannot boot'\n")
      pid = Process.spawn(RbConfig.ruby, File.join(ROOT, "exe/oribi"), "--no-preload", "-w", "2",
                          "-b", "unix://#{d}/s", File.join(d, "boom.ru"), out: File::NULL, err: "#{d}/log")
      status = nil
      assert wait_until(timeout: 20) { status = Process.wait2(pid, Process::WNOHANG)&.last }, "master kept forking"
      refute status.success?
      log = File.read("#{d}/log")
      assert_match(/cannot boot/, log)
      assert_match(/workers died while booting 3 times in a row/, log)
    ensure
      begin
        Process.kill(:KILL, pid)
        Process.wait(pid)
      rescue Errno::ESRCH, Errno::ECHILD
        nil
      end
    end
  end

  def test_usr1_reopens_log_files
    Dir.mktmpdir do |d|
      log = File.join(d, "err.log")
      access = File.join(d, "access.log")
      srv = ServerProcess.new("env.ru", "--stderr", log, "--access-log", access, workers: 1)
      assert_equal 200, HTTPClient.request(srv.tcp, "/before").status
      assert wait_until { File.exist?(access) && File.read(access).include?("/before") }
      File.rename(log, "#{log}.1")
      File.rename(access, "#{access}.1")
      Process.kill(:USR1, srv.pid)
      assert wait_until { File.exist?(access) }, "access log not reopened"
      assert_equal 200, HTTPClient.request(srv.tcp, "/after").status
      assert wait_until { File.read(access).include?("/after") }
      refute_includes File.read("#{access}.1"), "/after"
      Process.kill(:TERM, srv.pid)
      assert wait_until { File.exist?(log) && File.read(log).include?("draining") }, "stderr not reopened"
    ensure
      srv&.stop
    end
  end

  # Under a Puma config the master takes Puma's signals: USR1 (what
  # `pumactl phased-restart` and Capistrano's puma tasks send) replaces the
  # workers one by one while they serve, where it used to reopen the logs
  # and log nothing; HUP reopens stdout_redirect's files, as Puma's;
  # TTIN/TTOU add and remove a worker. Each logs one line.
  def test_a_puma_config_takes_pumas_signals
    Dir.mktmpdir do |d|
      err = File.join(d, "err.log")
      conf = File.join(d, "puma.rb")
      File.write(conf, "workers 2\nstdout_redirect #{File.join(d, 'out.log').dump}, #{err.dump}\n")
      srv = ServerProcess.new("slow.ru", "-C", conf, workers: nil, unix: false, env: { "WEB_CONCURRENCY" => nil })
      log = -> { File.exist?(err) ? File.read(err) : "" }
      assert wait_until(timeout: 10) { srv.worker_pids.size == 2 }
      old = srv.worker_pids
      Process.kill(:USR1, srv.pid)
      answers = []
      replaced = wait_until(timeout: 30) do
        answers << HTTPClient.request(srv.tcp, "/", headers: { "Connection" => "close" }).status
        srv.worker_pids.size == 2 && !srv.worker_pids.intersect?(old)
      end
      assert replaced, "USR1 did not replace the workers:\n#{log.call}"
      assert_equal [200], answers.uniq
      assert_match(/USR1 \(Puma's\): rolling restart of 2 worker\(s\)/, log.call)
      assert wait_until { log.call.include?("rolling restart done") }, log.call

      Process.kill(:TTIN, srv.pid)
      assert wait_until { srv.worker_pids.size == 3 }, "TTIN did not add a worker"
      Process.kill(:TTOU, srv.pid)
      assert wait_until { srv.worker_pids.size == 2 }, "TTOU did not remove a worker"
      assert_match(/TTIN: 3 workers.*TTOU: 2 workers/m, log.call)

      File.rename(err, "#{err}.1")
      Process.kill(:HUP, srv.pid)
      assert wait_until { File.exist?(err) && File.read(err).include?("HUP (Puma's): reopened the log files") },
             "HUP did not reopen stdout_redirect's file:\n#{File.read("#{err}.1")}"
      assert_equal 200, HTTPClient.request(srv.tcp, "/").status
      assert_equal 2, srv.worker_pids.size
    ensure
      srv&.stop
    end
  end

  # Puma's HUP without stdout_redirect is INT: a graceful stop.
  def test_hup_under_a_puma_config_without_stdout_redirect_stops
    Dir.mktmpdir do |d|
      conf = File.join(d, "puma.rb")
      File.write(conf, "workers 1\n")
      srv = ServerProcess.new("env.ru", "-C", conf, workers: nil, unix: false, env: { "WEB_CONCURRENCY" => nil })
      Process.kill(:HUP, srv.pid)
      status = srv.wait_exit(15)
      assert status&.success?, "HUP gave #{status.inspect}:\n#{srv.log}"
      assert_match(/HUP \(Puma's\), no stdout_redirect: as INT: draining/, srv.log)
    ensure
      srv&.stop
    end
  end

  # Under Oribi's own config every signal logs what it does too: USR1
  # reopened the logs without a word, a TTOU at one worker did nothing
  # without one.
  def test_each_signal_logs_what_it_does
    srv = ServerProcess.new("env.ru", workers: 1)
    assert wait_until { srv.worker_pids.size == 1 }
    Process.kill(:USR1, srv.pid)
    assert_match(/USR1: reopened the log files/, srv.log_until(/USR1/))
    Process.kill(:TTOU, srv.pid)
    assert_match(/TTOU ignored: one worker is the fewest/, srv.log_until(/TTOU/))
    Process.kill(:HUP, srv.pid)
    assert_match(/HUP: rolling restart of 1 worker/, srv.log_until(/HUP/))
    assert_equal 200, HTTPClient.request(srv.tcp, "/").status
  ensure
    srv&.stop
  end

  # With workers 0 the lone server says what a signal does too.
  def test_a_lone_server_logs_what_each_signal_does
    srv = ServerProcess.new("env.ru", workers: 0)
    Process.kill(:USR1, srv.pid)
    assert_match(/USR1: reopened the log files/, srv.log_until(/USR1/))
    Process.kill(:TERM, srv.pid)
    assert srv.wait_exit(10)&.success?, srv.log
    assert_match(/TERM: draining/, srv.log)
  ensure
    srv&.stop
  end
end
