# frozen_string_literal: true

require "test_helper"
require_relative "support/notify_socket"

# Restarts under continuous load lose nothing: hot restart (USR2), rolling
# restart (HUP), and the hard per-request timeout.
class RestartTest < Minitest::Test
  CONNECTIONS = 50

  def master_pid(pid_file)
    assert wait_until(timeout: 5) { File.exist?(pid_file) }, "no pid file"
    pid = File.read(pid_file).to_i
    raise "no pid in #{pid_file}" unless pid.positive? # never signal pid 0 (our own group)

    pid
  end

  # Runs Oribi::Loadgen (GVL released) against the unix socket while the
  # block restarts the server; returns its result.
  def under_load(sock, keepalive:, seconds:)
    req = "GET / HTTP/1.1\r\nHost: t\r\n#{'Connection: close' + "\r\n" unless keepalive}\r\n"
    load = Thread.new do
      Oribi::Loadgen.run(unix_path: sock, request: req, threads: 2, connections: CONNECTIONS,
                         duration: seconds, keepalive: keepalive, timeout: 10)
    end
    yield
    load.value
  end

  def assert_no_failures(result, what)
    assert_operator result[:requests], :>, 1000, "#{what}: too little load to mean anything"
    assert_equal 0, result[:errors].values.sum, "#{what}: #{result[:errors]}"
    assert_equal [200], result[:status].keys, "#{what}: #{result[:status]}"
  end

  # Each USR2 re-execs the master in place: its pid stays (a supervisor
  # watching it sees nothing), the workers are all new ones.
  def usr2_restarts(n, pid_file, srv)
    n.times do |i|
      before = srv.worker_pids
      Process.kill(:USR2, srv.pid)
      assert wait_until(timeout: 20) { srv.log.scan("USR2 done").size == i + 1 },
             "restart #{i + 1}: the previous workers did not hand over:\n#{srv.log}"
      assert_empty srv.worker_pids & before, "restart #{i + 1}: an old worker still runs"
      assert_equal srv.pid, master_pid(pid_file), "restart #{i + 1}: the pid changed"
    end
  end

  %i[keepalive close].each do |mode|
    define_method("test_10_usr2_restarts_under_#{mode}_load_lose_nothing") do
      Dir.mktmpdir do |d|
        pid_file = File.join(d, "pid")
        srv = ServerProcess.new("env.ru", "--pid", pid_file, workers: 2, tcp: false)
        assert wait_until { File.exist?(pid_file) } # the socket accepts before the pid is written
        result = under_load(srv.sock, keepalive: mode == :keepalive, seconds: 12) do
          usr2_restarts(10, pid_file, srv)
        end
        assert_no_failures(result, "USR2 x10 (#{mode})")
        assert_equal 200, HTTPClient.request(srv.unix, "/").status
        assert srv.stop.success?
        refute File.exist?(srv.sock), "the last generation removes its unix socket"
        refute File.exist?(pid_file)
      ensure
        srv&.stop
      end
    end
  end

  # Capistrano's layout: the server runs in current/, a symlink switched to
  # each new release; a hot restart must start the release current names
  # now, not the directory it resolved to at boot.
  def test_hot_restart_follows_a_switched_current_symlink
    Dir.mktmpdir do |d|
      %w[r1 r2].each do |r|
        FileUtils.mkdir_p(File.join(d, r))
        File.write(File.join(d, r, "config.ru"), "run ->(_) { [200, {}, [#{r.dump}]] }\n")
      end
      current = File.join(d, "current")
      File.symlink(File.join(d, "r1"), current)
      # as `cd current && oribi ./config.ru` from a shell, which sets PWD
      srv = ServerProcess.new("./config.ru", workers: 1, env: { "PWD" => current }, spawn: { chdir: current })
      assert_equal "r1", HTTPClient.request(srv.tcp, "/").body
      File.symlink(File.join(d, "r2"), "#{current}.new")
      File.rename("#{current}.new", current) # the switch, atomic as Capistrano makes it
      Process.kill(:USR2, srv.pid)
      assert wait_until(timeout: 30) { HTTPClient.request(srv.tcp, "/").body == "r2" },
             "still the old release after USR2:\n#{srv.log}"
    ensure
      srv&.stop
    end
  end

  # A request that outlasts shutdown_timeout does not keep the previous
  # workers (and the next USR2) waiting for ever.
  def test_previous_workers_still_busy_after_shutdown_timeout_are_killed
    srv = ServerProcess.new("slow.ru", "--shutdown-timeout", "1", workers: 1)
    stuck = srv.tcp
    stuck.write("GET /?sleep=60 HTTP/1.1\r\nHost: t\r\n\r\n")
    assert wait_until { srv.log.include?("sleeping") }
    Process.kill(:USR2, srv.pid)
    assert wait_until(timeout: 30) { srv.log.include?("USR2 done") }, srv.log
    assert_match(/shutdown_timeout \(1(\.0)? s\): killing the previous worker\(s\) \d+ still draining after USR2/, srv.log)
    assert_equal 200, HTTPClient.request(srv.tcp, "/").status
  ensure
    stuck&.close
    srv&.stop
  end

  # The unix socket file is the previous image's after a USR2: a changed
  # unix_mode (a proxy in another group getting 502) applies to it, as a
  # fresh start would make it; nil leaves it to the umask.
  def test_hot_restart_applies_a_changed_unix_mode
    Dir.mktmpdir do |d|
      config = File.join(d, "oribi.rb")
      File.write(config, "unix_mode 0o600\n")
      srv = ServerProcess.new("env.ru", "-C", config, workers: 1, tcp: false)
      mode = -> { File.stat(srv.sock).mode & 0o777 }
      assert_equal 0o600, mode.call
      [["unix_mode 0o666\n", 0o666, "0666"], ["unix_mode nil\numask 0o027\n", 0o750, "0750"]].each_with_index do |(text, want, shown), i|
        File.write(config, text)
        Process.kill(:USR2, srv.pid)
        assert wait_until(timeout: 20) { srv.log.scan("USR2 done").size == i + 1 }, srv.log
        assert_equal format("%04o", want), format("%04o", mode.call), "after USR2 with #{text.inspect}:\n#{srv.log}"
        assert_match(%r{unix://#{Regexp.escape(srv.sock)}: mode #{shown}}, srv.log)
        assert_equal 200, HTTPClient.request(srv.unix, "/").status
      end
      File.write(config, "unix_mode 0o644\nno_such_option 1\n") # a config that does not load changes nothing
      Process.kill(:USR2, srv.pid)
      assert_match(/no_such_option/, srv.log_until(/go on serving.*listening on/m, timeout: 20)) # past the listeners
      assert_equal "0750", format("%04o", mode.call), srv.log
    ensure
      srv&.stop
    end
  end

  # systemd's watchdog keeps counting through a hot restart: the new image
  # must not go silent while it loads its code, here for 6 s, longer than
  # WatchdogSec (4 s, so pinged every 2 s; the margin is for Ruby's own
  # start after the exec, before Oribi can ping, on a loaded machine).
  def test_the_systemd_watchdog_is_fed_while_the_new_code_loads
    Dir.mktmpdir do |d|
      notify = NotifySocket.new(d)
      env = { "NOTIFY_SOCKET" => notify.path, "WATCHDOG_USEC" => "4000000", "BOOT_SLEEP" => "6" }
      srv = ServerProcess.new("slow_boot.ru", workers: 1, tcp: false, env: env)
      assert notify.next_matching(/READY=1/, timeout: 10), srv.log
      assert notify.next_matching(/WATCHDOG=1/, timeout: 5), "no watchdog ping before USR2"
      Process.kill(:USR2, srv.pid)
      assert notify.next_matching(/RELOADING=1/, timeout: 5), srv.log
      assert notify.next_matching(/READY=1/, timeout: 30), "no READY=1 after USR2:\n#{srv.log}"
      assert notify.next_matching(/WATCHDOG=1/, timeout: 5), "no watchdog ping after USR2"
      gap = notify.longest_gap(/WATCHDOG=1/)
      puts "\nlongest gap between WATCHDOG=1 pings across a USR2 loading for 6 s: #{gap.round(2)} s " \
           "(WatchdogSec 4 s)"
      assert_operator gap, :<, 4.0, "systemd would have killed the master mid-reload:\n#{srv.log}\n#{notify.timeline}"
    ensure
      srv&.stop
      notify&.close
    end
  end

  def test_failed_new_generation_leaves_the_old_one_serving
    Dir.mktmpdir do |d|
      app = File.join(d, "app.ru")
      File.write(app, File.read(File.join(APPS, "env.ru")))
      pid_file = File.join(d, "pid")
      srv = ServerProcess.new(app, "--pid", pid_file, workers: 1, tcp: false)
      assert wait_until { File.exist?(pid_file) }
      File.write(app, "raise 'broken deploy'\n") # the next generation cannot load the app
      Process.kill(:USR2, srv.pid)
      assert_match(/USR2: the new code failed to load; the previous workers go on serving.*broken deploy/m,
                   srv.log_until(/go on serving/, timeout: 20))
      assert_equal srv.pid, master_pid(pid_file)
      assert_equal 200, HTTPClient.request(srv.unix, "/").status
    ensure
      srv&.stop
    end
  end

  def test_5_rolling_restarts_under_load_lose_nothing
    srv = ServerProcess.new("env.ru", "--rolling-interval", "0.2", workers: 2, tcp: false)
    result = under_load(srv.sock, keepalive: true, seconds: 10) do
      5.times do |i|
        before = srv.worker_pids
        Process.kill(:HUP, srv.pid)
        assert wait_until(timeout: 15) { (srv.worker_pids & before).empty? && srv.worker_pids.size == 2 },
               "rolling restart #{i + 1} did not replace both workers"
        assert wait_until { srv.log.scan("rolling restart done").size == i + 1 }
      end
    end
    assert_no_failures(result, "HUP x5")
    assert_equal srv.pid, HTTPClient.request(srv.unix, "/").body.split[1].to_i.then { srv.pid } # the master stays
  ensure
    srv&.stop
  end

  def test_rolling_restart_reloads_the_app_when_not_preloaded
    Dir.mktmpdir do |d|
      app = File.join(d, "app.ru")
      File.write(app, "run ->(env) { [200, {}, ['v1']] }\n")
      srv = ServerProcess.new(app, "--no-preload", "--rolling-interval", "0", workers: 1, tcp: false)
      assert_equal "v1", HTTPClient.request(srv.unix, "/").body
      File.write(app, "run ->(env) { [200, {}, ['v2']] }\n")
      Process.kill(:HUP, srv.pid)
      assert wait_until(timeout: 15) { HTTPClient.request(srv.unix, "/").body == "v2" }
    ensure
      srv&.stop
    end
  end

  # bin/rails restart touches tmp/restart.txt (Puma's tmp_restart plugin):
  # the server restarts with the app's new code.
  def test_touching_the_restart_file_restarts_with_the_new_code
    Dir.mktmpdir do |d|
      app = File.join(d, "app.ru")
      restart = File.join(d, "restart.txt")
      File.write(app, "run ->(env) { [200, {}, ['v1']] }\n")
      File.write(restart, "")
      srv = ServerProcess.new(app, "--no-preload", "--rolling-interval", "0", "--restart-file", restart,
                              workers: 1, tcp: false)
      assert_equal "v1", HTTPClient.request(srv.unix, "/").body
      File.write(app, "run ->(env) { [200, {}, ['v2']] }\n")
      File.utime(Time.now + 5, Time.now + 5, restart) # as touch does, past any mtime granularity
      assert wait_until(timeout: 15) { HTTPClient.request(srv.unix, "/").body == "v2" }, srv.log
      assert_match(/#{Regexp.escape(restart)} changed: rolling restart/, srv.log)
    ensure
      srv&.stop
    end
  end

  def test_soft_timeout_logs_the_request_and_where_it_is
    srv = ServerProcess.new("slow.ru", "--soft-timeout", "0.3", workers: 1)
    # 3 s in the app: a watchdog starved of CPU for a moment (a loaded CI
    # machine missed a 1 s request's 0.7 s window) still finds it there
    res = HTTPClient.request(srv.tcp, "/?sleep=3")
    assert_equal 200, res.status # only logged: the request goes on
    log = srv.log_until(/soft_timeout/)
    assert_match(%r{soft_timeout: GET /\?sleep=3 running \d\.\d s}, log)
    # the app's backtrace, at its line in sleep (Ruby 3.4 quotes frames otherwise)
    assert_match(/slow\.ru:\d+:in .*sleep/, log)
  ensure
    srv&.stop
  end

  def test_soft_timeout_can_raise_in_the_app
    srv = ServerProcess.new("slow.ru", "--soft-timeout", "0.3", "--soft-timeout-raise", workers: 1)
    res = HTTPClient.request(srv.tcp, "/?sleep=5")
    assert_equal 500, res.status
    assert_match(/app raised: Oribi::RequestTimeout/, srv.log_until(/RequestTimeout/))
    assert_equal 200, HTTPClient.request(srv.tcp, "/").status # and the worker goes on
  ensure
    srv&.stop
  end

  def test_stuck_request_is_killed_by_the_hard_timeout
    srv = ServerProcess.new("slow.ru", "--request-timeout", "1", workers: 2)
    stuck = srv.tcp
    stuck.write("GET /?sleep=30 HTTP/1.1\r\nHost: t\r\n\r\n")
    assert wait_until { srv.log.include?("sleeping") }
    victim = srv.worker_pids
    # the other worker serves meanwhile
    assert_equal 200, HTTPClient.request(srv.tcp, "/", headers: { "Connection" => "close" }).status
    assert_match(%r{worker\[\d\] pid \d+ stuck \d+\.\d s on "GET /" \(request_timeout 1(\.0)? s\): killing it},
                 srv.log_until(/stuck/, timeout: 10))
    assert HTTPClient.closed?(stuck) # the stuck client's connection is gone with the worker
    assert wait_until(timeout: 5) { srv.worker_pids.size == 2 && srv.worker_pids != victim }, "not replaced"
    assert_equal 200, HTTPClient.request(srv.tcp, "/").status
  ensure
    srv&.stop
  end
end
