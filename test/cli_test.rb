# frozen_string_literal: true

require "test_helper"
require "open3"
require "set"

# exe/oribi as an operator meets it: options, listeners, process layout.
class CLITest < Minitest::Test
  OribiExe = File.join(ROOT, "exe/oribi")

  def run_oribi(*args, chdir: ROOT)
    Open3.capture3(RbConfig.ruby, OribiExe, *args, chdir: chdir)
  end

  def test_help_lists_the_options
    out, _, st = run_oribi("--help")
    assert st.success?
    %w[--bind --workers --[no-]keepalive --env --help --keepalive-timeout --header-timeout --max-body
       --check-config].each do |flag|
      assert_includes out, flag
    end
    assert_includes out, "oribi ctl #{Oribi::Ctl::COMMANDS.keys.join('|')}" # every ctl command, health too
  end

  def test_bad_option_is_one_line_and_nonzero
    _, err, st = run_oribi("--frobnicate")
    refute st.success?
    assert_equal 1, err.lines.size
    assert_match(/invalid option: --frobnicate/, err)
  end

  def test_limits_from_the_command_line
    srv = ServerProcess.new("env.ru", "--max-request-line", "64", "--max-headers", "3")
    s = srv.tcp
    s.write("GET /#{'a' * 100} HTTP/1.1\r\nHost: t\r\n\r\n")
    assert_equal 414, HTTPClient.read_response(s).status
    s = srv.tcp
    s.write("GET / HTTP/1.1\r\nHost: t\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n")
    assert_equal 431, HTTPClient.read_response(s).status
    assert_equal 200, HTTPClient.request(srv.tcp, "/").status
  ensure
    srv&.stop
  end

  def test_invalid_option_value_is_refused
    _, err, st = run_oribi("--max-headers", "0", File.join(APPS, "env.ru"))
    refute st.success?
    assert_match(/invalid value for max_headers: 0/, err)
  end

  def test_bad_bind_uri
    _, err, st = run_oribi("-b", "http://x", File.join(APPS, "env.ru"))
    refute st.success?
    assert_match(/cannot bind "http:\/\/x"/, err)
  end

  def test_missing_rackup_file
    Dir.mktmpdir do |d|
      _, err, st = run_oribi("-b", "unix://#{d}/s", chdir: d)
      refute st.success?
      assert_match(/no rackup file config.ru/, err)
    end
  end

  def test_env_flag_and_single_process
    srv = ServerProcess.new("env.ru", "-E", "staging", tcp: false)
    res = HTTPClient.request(srv.unix, "/")
    env, pid, multi = res.body.split
    assert_equal "staging", env
    assert_equal srv.pid, pid.to_i # -w 0: the server process serves itself
    assert_equal "false", multi
    assert srv.stop.success?
  end

  def test_unix_socket_stale_file_is_replaced_and_removed_on_exit
    Dir.mktmpdir do |d|
      path = File.join(d, "app.sock")
      stale = UNIXServer.new(path)
      stale.close # the file stays, nobody listens: a crashed server's leftover
      assert File.socket?(path)
      srv = ServerProcess.new(File.join(APPS, "env.ru"), "-b", "unix://#{path}", tcp: false, unix: false, sock: path)
      assert_equal 200, HTTPClient.request(UNIXSocket.new(path), "/").status
      assert srv.stop.success?
      refute File.exist?(path), "socket file left behind"
    end
  end

  def test_unix_socket_is_0660_by_default_and_the_log_says_who_may_connect
    srv = ServerProcess.new("env.ru", workers: 1)
    assert_equal 0o660, File.stat(srv.sock).mode & 0o777
    user = Etc.getpwuid(Process.uid).name
    group = Etc.getgrgid(Process.gid).name
    # the banner comes after the app loaded, which may be after the listeners accept
    assert_match(/listening on unix:\/\/#{Regexp.escape(srv.sock)} \(mode 0660, #{user}:#{group}: a proxy must run as #{user} or in group #{group} to connect\)/,
                 srv.log_until(/listening on unix/))
  ensure
    srv&.stop
  end

  # The file stays while the workers drain (a proxy still reaches them);
  # a server started on the path once they closed their listeners keeps
  # its own file when the old master exits.
  def test_a_draining_server_leaves_a_new_servers_socket_file_alone
    old = ServerProcess.new("slow.ru", "-t", "2", workers: 1, tcp: false)
    s = old.unix
    s.write("GET /?sleep=1 HTTP/1.1\r\nHost: t\r\n\r\n")
    assert wait_until { old.log.include?("sleeping") }
    Process.kill(:TERM, old.pid)
    # a thread is free: the worker finds the backlog empty and closes it
    closed = wait_until do
      UNIXSocket.new(old.sock).close
      false
    rescue Errno::ECONNREFUSED
      true
    end
    assert closed, "the draining worker kept its listener"
    assert File.socket?(old.sock), "the socket file went away while a request was in flight"
    fresh = ServerProcess.new("env.ru", workers: 1, tcp: false, sock: old.sock)
    assert_equal 200, HTTPClient.read_response(s).status
    assert old.wait_exit(10)&.success?
    assert_equal 200, HTTPClient.request(fresh.unix, "/").status, "the old master removed the new server's socket file"
  ensure
    old&.stop
    fresh&.stop
  end

  def test_unix_socket_in_use_is_refused
    Dir.mktmpdir do |d|
      path = File.join(d, "app.sock")
      live = UNIXServer.new(path)
      _, err, st = run_oribi("-b", "unix://#{path}", File.join(APPS, "env.ru"))
      refute st.success?
      assert_match(/another server is listening/, err)
      assert File.socket?(path), "a live socket must not be removed"
    ensure
      live&.close
    end
  end

  def test_non_socket_file_is_not_replaced
    Dir.mktmpdir do |d|
      path = File.join(d, "file")
      File.write(path, "data")
      _, err, st = run_oribi("-b", "unix://#{path}", File.join(APPS, "env.ru"))
      refute st.success?
      assert_match(/not a socket/, err)
      assert_equal "data", File.read(path)
    end
  end

  def test_prefork_workers_share_the_listener
    srv = ServerProcess.new("env.ru", workers: 2, unix: false)
    pids = Set.new
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    # connection per request until both workers have answered (bounded)
    while pids.size < 2 && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      threads = 4.times.map { Thread.new { HTTPClient.request(srv.tcp, "/").body.split[1] } }
      threads.each { |t| pids << t.value }
    end
    assert_equal 2, pids.size
    refute_includes pids, srv.pid.to_s # the master does not serve
    assert_includes HTTPClient.request(srv.tcp, "/").body, "true" # rack.multiprocess
    status = srv.stop
    assert status.success?, -> { "#{status.inspect}; the server's log:\n#{srv.log}" }
  end

  def test_ipv6_listener_and_remote_addr
    port = TCPServer.open("::1", 0) { |s| s.addr[1] }
    srv = ServerProcess.new(File.join(APPS, "echo.ru"), "-b", "tcp://[::1]:#{port}", tcp: false)
    res = HTTPClient.request(TCPSocket.new("::1", port), "/")
    assert_match(/^REMOTE_ADDR: ::1$/, res.body)
    assert_match(/^SERVER_NAME: test$/, res.body)
    s = TCPSocket.new("::1", port)
    s.write("GET / HTTP/1.0\r\n\r\n") # no Host: the listener's own address
    assert_match(/^SERVER_NAME: \[::1\]$/, HTTPClient.read_response(s).body)
  ensure
    srv&.stop
  end

  # As Puma's: localhost is both loopbacks, whichever a client resolves.
  def test_localhost_binds_both_loopback_addresses
    port = free_port
    srv = ServerProcess.new(File.join(APPS, "echo.ru"), "-b", "tcp://localhost:#{port}", tcp: false)
    assert_match(/^REMOTE_ADDR: 127\.0\.0\.1$/, HTTPClient.request(TCPSocket.new("127.0.0.1", port), "/").body)
    assert_match(/^REMOTE_ADDR: ::1$/, HTTPClient.request(TCPSocket.new("::1", port), "/").body)
    assert_match(%r{listening on tcp://127\.0\.0\.1:#{port}\b.*\n.*listening on tcp://\[::1\]:#{port}\b}, srv.log)
  ensure
    srv&.stop
  end

  # user: the app runs unprivileged in the workers; the master, which
  # binds and forks, keeps what it started with (as Unicorn's). The server
  # runs from a copy in a directory only root may enter (as a gem home under
  # /root is): a worker must need nothing from there once it is nobody.
  def test_workers_run_as_the_given_user
    skip "needs root to change user" unless Process.uid.zero?
    nobody = Etc.getpwnam("nobody")
    private_dir = Dir.mktmpdir("oribi-private") # 0700
    FileUtils.cp_r([File.join(ROOT, "lib"), File.join(ROOT, "exe")], private_dir)
    app = File.join(Dir.mktmpdir("oribi-app").tap { |d| File.chmod(0o755, d) }, "env.ru")
    FileUtils.cp(File.join(APPS, "env.ru"), app)
    File.chmod(0o644, app)
    # Outside the bundle, whose load path holds this checkout's lib/ too
    env = { "RUBYOPT" => nil, "BUNDLE_GEMFILE" => nil, "BUNDLE_LOCKFILE" => nil, "RUBYLIB" => Gem.loaded_specs["rack"].full_require_paths.join(":") }
    srv = ServerProcess.new(app, "--user", "nobody", workers: 1, env: env, exe: File.join(private_dir, "exe/oribi"))
    assert_equal 200, HTTPClient.request(srv.tcp, "/")&.status, srv.log
    assert wait_until { srv.worker_pids.size == 1 }
    uid = ->(pid) { File.read("/proc/#{pid}/status")[/^Uid:\s+(\d+)/, 1].to_i }
    gid = ->(pid) { File.read("/proc/#{pid}/status")[/^Gid:\s+(\d+)/, 1].to_i }
    worker = srv.worker_pids.first
    assert_equal [nobody.uid, nobody.gid], [uid.call(worker), gid.call(worker)]
    assert_equal 0, uid.call(srv.pid)
  ensure
    srv&.stop
    FileUtils.rm_rf([private_dir, File.dirname(app.to_s)].compact) if private_dir
  end

  def test_term_lets_the_request_in_flight_finish
    srv = ServerProcess.new("slow.ru", tcp: false)
    s = srv.unix
    s.write("GET /?sleep=0.5 HTTP/1.1\r\nHost: t\r\n\r\n")
    srv.log_until(/sleeping/) # the app has the request
    Process.kill(:TERM, srv.pid)
    res = HTTPClient.read_response(s)
    assert_equal 200, res.status
    assert_equal "close", res["connection"] # no keep-alive while draining
    assert srv.stop.success?
  ensure
    srv&.stop
  end

  def test_default_rackup_is_config_ru
    Dir.mktmpdir do |d|
      FileUtils.cp(File.join(APPS, "env.ru"), File.join(d, "config.ru"))
      sock = File.join(d, "s")
      pid = Process.spawn(RbConfig.ruby, OribiExe, "-w", "1", "-b", "unix://#{sock}", chdir: d, err: File::NULL)
      # accepting, not only bound: the file exists from bind(2), before listen(2)
      client = wait_until(timeout: 10) do
        UNIXSocket.new(sock)
      rescue Errno::ENOENT, Errno::ECONNREFUSED
        nil
      end
      assert client, "the server never accepted on #{sock}"
      assert_equal 200, HTTPClient.request(client, "/").status
    ensure
      Process.kill(:TERM, pid)
      Process.wait(pid)
    end
  end
end
