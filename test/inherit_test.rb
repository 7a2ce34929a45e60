# frozen_string_literal: true

require "test_helper"
require "json"
require_relative "support/notify_socket"
require_relative "support/tls"

# Listeners handed over by a supervisor: start_server (Server::Starter) and
# systemd socket activation, plus sd_notify.
class InheritTest < Minitest::Test
  ORIBI = File.join(ROOT, "exe/oribi")


  def pid_of(res) = res.body.split[1].to_i

  def get(port)
    HTTPClient.request(TCPSocket.new("127.0.0.1", port), "/", headers: { "Connection" => "close" })
  end

  def test_start_server_every_fd_and_hup_restarts_without_failures
    skip "start_server not installed (Debian libserver-starter-perl)" unless system("which start_server > /dev/null")
    Dir.mktmpdir do |d|
      port = free_port
      sock = File.join(d, "app.sock")
      log = File.join(d, "log")
      starter = Oribi::ProcessGroup.new(["start_server", "--port=127.0.0.1:#{port}", "--path=#{sock}", "--interval=1",
                                         "--", RbConfig.ruby, ORIBI, "-w", "2", File.join(APPS, "env.ru")], log: log)
      assert wait_until(timeout: 20) { status_of { get(port) } == 200 }, File.read(log)
      assert File.socket?(sock)
      assert_equal 200, HTTPClient.request(UNIXSocket.new(sock), "/").status # the second fd is used too
      text = File.read(log)
      assert_match(/listening on tcp:\/\/127\.0\.0\.1:#{port} \(inherited fd \d+\)/, text)
      assert_match(/listening on unix:\/\/#{Regexp.escape(sock)} \(inherited fd \d+\)/, text)

      old = pid_of(get(port))
      old_master = File.read("/proc/#{old}/stat").split[3].to_i
      Process.kill(:HUP, starter.pid)
      failures = 0
      seen_new = false
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
      until seen_new || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        res = begin
          get(port)
        rescue SystemCallError, EOFError
          nil
        end
        failures += 1 unless res&.status == 200
        next unless res&.status == 200

        w = pid_of(res)
        seen_new = parent_of(w) != old_master
      end
      assert seen_new, "no new generation served:\n#{File.read(log)}"
      assert_equal 0, failures, File.read(log)
      # the old generation drained and exited
      assert wait_until(timeout: 10) { !process_alive?(old_master) }
      assert File.socket?(sock), "the inherited unix socket must not be removed"
      assert starter.stop(timeout: 30).success?, File.read(log)
    ensure
      starter&.stop(:KILL, timeout: 0)
    end
  end

  # start_server hands over a socket, not its settings: the config's
  # ssl:// bind at that address makes it a TLS listener, across a HUP too.
  def test_start_server_socket_with_the_config_s_tls_settings
    skip "start_server not installed (Debian libserver-starter-perl)" unless system("which start_server > /dev/null")
    Dir.mktmpdir do |d|
      port = free_port
      cert, key = TLSFiles.write(d, "server")
      conf = File.join(d, "oribi.rb")
      File.write(conf, %(bind "ssl://127.0.0.1:#{port}?cert=#{cert}&key=#{key}"\n))
      log = File.join(d, "log")
      starter = Oribi::ProcessGroup.new(["start_server", "--port=127.0.0.1:#{port}", "--interval=1", "--", RbConfig.ruby,
                                         ORIBI, "-w", "1", "-C", conf, File.join(APPS, "env.ru")], log: log)
      https = lambda do
        c = TLSClient.open(port)
        c.write("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        HTTPClient.read_response(c)&.status
      rescue StandardError
        nil
      end
      assert wait_until(timeout: 20) { https.() == 200 }, File.read(log)
      assert_match(/listening on ssl:\/\/127\.0\.0\.1:#{port} \(inherited fd \d+\) \(TLS: CN=localhost/, File.read(log))
      refute_match(/not used: the listening sockets come from/, File.read(log))
      Process.kill(:HUP, starter.pid)
      assert wait_until(timeout: 20) { File.read(log).scan(/\(TLS: CN=localhost/).size >= 2 }, File.read(log)
      assert_equal 200, https.()
      assert starter.stop(timeout: 30).success?, File.read(log)
    ensure
      starter&.stop(:KILL, timeout: 0)
    end
  end

  # The master pid that answers /stats on the control endpoint, nil if none.
  def control_pid(kind, where)
    sock = kind == :unix ? UNIXSocket.new(where) : TCPSocket.new("127.0.0.1", where)
    res = HTTPClient.request(sock, "/stats", headers: { "Authorization" => "Bearer sesame", "Connection" => "close" })
    res.status == 200 ? JSON.parse(res.body)["pid"] : nil
  rescue SystemCallError, EOFError, Timeout::Error
    nil
  ensure
    sock&.close
  end

  # start_server starts the next generation while the old one still holds
  # the control endpoint: the new one must take it over, not loop on
  # "Address already in use" with the deploy never happening.
  %i[unix tcp].each do |kind|
    define_method("test_start_server_hup_hands_the_#{kind}_control_endpoint_over") do
      skip "start_server not installed (Debian libserver-starter-perl)" unless system("which start_server > /dev/null")
      Dir.mktmpdir do |d|
        port = free_port
        where = kind == :unix ? File.join(d, "ctl.sock") : free_port
        uri = kind == :unix ? "unix://#{where}" : "tcp://127.0.0.1:#{where}"
        File.write(File.join(d, "oribi.rb"), "control #{uri.inspect}\ncontrol_token \"sesame\"\n")
        log = File.join(d, "log")
        starter = Oribi::ProcessGroup.new(["start_server", "--port=127.0.0.1:#{port}", "--interval=1", "--", RbConfig.ruby,
                                           ORIBI, "-w", "1", "-C", File.join(d, "oribi.rb"), File.join(APPS, "env.ru")], log: log)
        assert wait_until(timeout: 20) { control_pid(kind, where) }, File.read(log)
        old = control_pid(kind, where)
        Process.kill(:HUP, starter.pid)
        assert wait_until(timeout: 30) { (now = control_pid(kind, where)) && now != old },
               "the new generation never answered the control endpoint:\n#{log_end(File.read(log), 3000)}"
        assert wait_until(timeout: 15) { !process_alive?(old) },
               "the old generation stopped"
        refute_nil control_pid(kind, where), "the endpoint outlives the old generation:\n#{File.read(log)}"
        refute_match(/already in use|another server/, File.read(log))
        assert starter.stop(timeout: 30).success?, File.read(log)
        refute File.exist?(where), "the last generation removes its control socket" if kind == :unix
      ensure
        starter&.stop(:KILL, timeout: 0)
      end
    end
  end

  %i[keepalive close].each do |mode|
    define_method("test_10_start_server_hups_under_#{mode}_load_lose_nothing") do
      skip "start_server not installed (Debian libserver-starter-perl)" unless system("which start_server > /dev/null")
      Dir.mktmpdir do |d|
        sock = File.join(d, "app.sock")
        log = File.join(d, "log")
        # start_server stops the old generation --interval seconds after it
        # started the new one, booted or not: an ASan build boots slower.
        interval = ENV["ORIBI_SANITIZE"] ? 3 : 1
        starter = Oribi::ProcessGroup.new(["start_server", "--path=#{sock}", "--interval=#{interval}", "--",
                                           RbConfig.ruby, ORIBI, "-w", "2", File.join(APPS, "env.ru")], log: log)
        assert wait_until(timeout: 20) { status_of { HTTPClient.request(UNIXSocket.new(sock), "/") } == 200 }
        req = "GET / HTTP/1.1\r\nHost: t\r\n#{"Connection: close\r\n" if mode == :close}\r\n"
        load = Thread.new do
          Oribi::Loadgen.run(unix_path: sock, request: req, threads: 2, connections: 50, duration: 15 + 10 * interval,
                             keepalive: mode == :keepalive, timeout: 10)
        end
        10.times do |i|
          Process.kill(:HUP, starter.pid)
          assert wait_until(timeout: 15 * interval) { File.read(log).scan(/^old worker \d+ died/).size == i + 1 },
                 "HUP #{i + 1} did not complete:\n#{log_end(File.read(log))}"
        end
        result = load.value
        assert_operator result[:requests], :>, 1000
        assert_equal 0, result[:errors].values.sum, result[:errors].inspect
        assert_equal [200], result[:status].keys
        assert starter.stop(timeout: 30).success?
      ensure
        starter&.stop(:KILL, timeout: 0)
      end
    end
  end

  def test_systemd_socket_activation_and_notify
    Dir.mktmpdir do |d|
      notify = NotifySocket.new(d)
      listener = TCPServer.new("127.0.0.1", 0)
      port = listener.addr[1]
      log = File.join(d, "log")
      # what systemd does: the socket at fd 3, LISTEN_PID set in the child
      pid = fork do
        ENV["LISTEN_FDS"] = "1"
        ENV["LISTEN_PID"] = Process.pid.to_s
        ENV["NOTIFY_SOCKET"] = notify.path
        exec(RbConfig.ruby, ORIBI, "-w", "1", "-b", "tcp://127.0.0.1:1", File.join(APPS, "env.ru"),
             3 => listener, %i[out err] => log)
      end
      listener.close # the server has its own copy now
      assert notify.next_matching(/READY=1/, timeout: 20), "no READY=1:\n#{File.read(log)}"
      assert_equal 200, get(port).status
      assert_match(/inherited fd 3/, File.read(log))
      refute_match(/:1\b/, File.read(log)[/listening on .*/]) # --bind is ignored when sockets are handed over
      # and the log says so
      assert_match(%r{bind tcp://127\.0\.0\.1:1 not used: the listening sockets come from systemd \(LISTEN_FDS\)},
                   File.read(log))
      Process.kill(:TERM, pid)
      assert notify.next_matching(/STOPPING=1/, timeout: 10), "no STOPPING=1:\n#{File.read(log)}"
      _, status = Process.wait2(pid)
      assert status.success?
    ensure
      notify&.close
    end
  end

  # With no master (workers 0) the server process itself tells systemd it
  # lives: it said READY=1 and then never WATCHDOG=1, so a unit with
  # WatchdogSec killed it after that many seconds.
  def test_a_single_process_feeds_the_watchdog
    Dir.mktmpdir do |d|
      notify = NotifySocket.new(d)
      srv = ServerProcess.new("env.ru", workers: 0, tcp: false,
                                        env: { "NOTIFY_SOCKET" => notify.path, "WATCHDOG_USEC" => "1000000" })
      assert notify.next_matching(/READY=1/, timeout: 20), srv.log
      3.times { |i| assert notify.next_matching(/WATCHDOG=1/, timeout: 2), "ping #{i + 1} of 3 missing" }
    ensure
      srv&.stop
      notify&.close
    end
  end

  def test_inherited_specs_are_parsed
    env = { "SERVER_STARTER_PORT" => "0.0.0.0:80=3;[::1]:8080=4;/tmp/app.sock=5;9000=6" }
    assert_equal [:start_server, [["0.0.0.0:80", 3], ["[::1]:8080", 4], ["/tmp/app.sock", 5], ["9000", 6]]],
                 Oribi::Listeners.inheritance(env)
    assert_nil Oribi::Listeners.inheritance("LISTEN_FDS" => "2", "LISTEN_PID" => "1")
    assert_equal [:systemd, [["web", 3], ["fd4", 4]]],
                 Oribi::Listeners.inheritance("LISTEN_FDS" => "2", "LISTEN_PID" => Process.pid.to_s, "LISTEN_FDNAMES" => "web")
    assert_raises(ArgumentError) { Oribi::Listeners.inheritance("SERVER_STARTER_PORT" => "80") }
  end

  private

  # The status of the answer, nil while nothing answers (not listening yet).
  def status_of
    yield.status
  rescue StandardError
    nil
  end

  # The parent pid of pid, nil once it is gone.
  def parent_of(pid)
    File.read("/proc/#{pid}/stat").split[3].to_i
  rescue Errno::ENOENT, Errno::ESRCH
    nil
  end
end
