# frozen_string_literal: true

require "test_helper"
require "fileutils"

# A deploy as Capistrano makes it: releases/N, each with its Gemfile and
# app, and a `current` symlink switched atomically to the newest; the
# server started as `cd current && bundle exec oribi` under a supervisor
# that watches the one pid it started (runit, foreman, a container's PID 1).
# Signalling the server after the switch serves the new release with no
# failed request, after the first release is deleted too, and the pid the
# supervisor watches never exits.
class DeployTest < Minitest::Test
  # A runit-style supervisor: runs the command, and when it exits runs it
  # again (after runit's one-second pause), logging each start and exit.
  SUPERVISOR = <<~'RUBY'
    log, *cmd = ARGV
    child = nil
    %w[TERM INT].each { |s| trap(s) { Process.kill(s, child) if child; exit } }
    loop do
      child = Process.spawn(*cmd)
      File.write(log, "start #{child}\n", mode: "a")
      _, st = Process.wait2(child)
      File.write(log, "exit #{child} #{st.inspect}\n", mode: "a")
      sleep 1
    end
  RUBY

  # Puma, the baseline of the HUP test, comes with the optional peers group
  PUMA = begin
    Gem::Specification.find_by_name("puma")
  rescue Gem::MissingSpecError
    nil
  end

  def setup
    @dir = Dir.mktmpdir("oribi-deploy")
    @current = File.join(@dir, "current")
    @sock = File.join(@dir, "app.sock")
    @pid_file = File.join(@dir, "oribi.pid")
    @log = File.join(@dir, "server.log")
    @sup_log = File.join(@dir, "supervisor.log")
  end

  def teardown
    @sup&.stop(timeout: 20)
    @sup = nil
    FileUtils.rm_rf(@dir)
  end

  # releases/N with a Gemfile of its own and an app that names its release,
  # then `current` switched to it as Capistrano does (rename over the link).
  def deploy(n, app: "run ->(_) { [200, {}, [#{"r#{n}".dump}]] }")
    release = File.join(@dir, "releases", n.to_s)
    FileUtils.mkdir_p(release)
    File.write(File.join(release, "Gemfile"),
               "source \"https://rubygems.org\"\ngem \"oribi\", path: #{ROOT.dump}\n#{"gem \"puma\"\n" if PUMA}")
    File.write(File.join(release, "config.ru"), "#{app}\n")
    File.symlink(release, "#{@current}.new")
    File.rename("#{@current}.new", @current)
    release
  end

  def start(*args, server: :oribi)
    @server = server
    # The suite's own gems, wherever its Bundler found them; none of its
    # Bundler settings (Bundler 4 exports the lock's path too: kept, the
    # releases' bundles would lock into the suite's own Gemfile.lock)
    env = user_env("PWD" => @current)
    cmd = [RbConfig.ruby, "-S", "bundle", "exec"]
    cmd += if server == :puma
             ["puma", "-w", "2", "-b", "unix://#{@sock}", "--pidfile", @pid_file, *args, "config.ru"]
           else
             ["ruby", File.join(ROOT, "exe/oribi"), "-w", "2", "-b", "unix://#{@sock}", "--pid", @pid_file,
              "--rolling-interval", "0", *args, "config.ru"]
           end
    @sup = Oribi::ProcessGroup.new([RbConfig.ruby, "-e", SUPERVISOR, @sup_log, *cmd], env: env, chdir: @current, log: @log)
    assert wait_until(timeout: 30) { body == "r1" }, "not serving r1:\n#{File.read(@log)}"
    assert wait_until { File.exist?(@pid_file) }
    @pid = File.read(@pid_file).to_i
    assert_equal [@pid], started, "the pid file names the process the supervisor started"
  end

  def log_tail = File.read(@log).then { |t| t[-[t.size, 4000].min..] }

  def started = File.read(@sup_log).scan(/^start (\d+)/).flatten.map(&:to_i)

  def body
    s = UNIXSocket.new(@sock)
    HTTPClient.request(s, "/", headers: { "Connection" => "close" }).body
  rescue SystemCallError, IOError
    nil
  rescue Timeout::Error
    flunk "#{@server}: a request got no response in 10 s:\n#{log_tail}"
  ensure
    s&.close
  end

  def under_load(seconds)
    load = Thread.new do
      Oribi::Loadgen.run(unix_path: @sock, request: "GET / HTTP/1.1\r\nHost: t\r\n\r\n", threads: 1,
                         connections: 8, duration: seconds, keepalive: true, timeout: 10)
    end
    yield
    load.value
  end

  # 20 requests in a row say the release: no worker of an older one serves.
  def assert_serves(release, why)
    assert wait_until(timeout: 40) { Array.new(20) { body }.uniq == [release] },
           "#{why}: not serving #{release} alone:\n#{log_tail}"
  end

  def assert_clean(result, what)
    assert_operator result[:requests], :>, 100, "#{what}: too little load to mean anything"
    assert_equal 0, result[:errors].values.sum, "#{what}: #{result[:errors]}\n#{log_tail}"
    assert_equal [200], result[:status].keys, "#{what}: #{result[:status]}"
    assert_equal [@pid], started, "#{what}: the supervisor had to start the server again:\n#{File.read(@log)}"
    assert process_alive?(@pid), "#{what}: the supervised pid exited"
    assert_equal @pid, File.read(@pid_file).to_i
  end

  def usr2_deploys(*args)
    first = deploy(1)
    start(*args)
    result = under_load(14) do
      deploy(2)
      Process.kill(:USR2, @pid)
      assert_serves("r2", "USR2 after the switch to releases/2")
      FileUtils.rm_rf(first) # Capistrano's keep_releases
      deploy(3)
      Process.kill(:USR2, @pid)
      assert_serves("r3", "USR2 with releases/1 deleted")
    end
    assert_clean(result, "USR2 deploys #{args.join(' ')}")
  end

  def test_usr2_deploys_the_new_release_preloaded
    usr2_deploys("--preload")
  end

  def test_usr2_deploys_the_new_release_not_preloaded
    usr2_deploys("--no-preload")
  end

  # HUP, Puma's phased restart (USR1): without preload each new worker
  # loads the app from the release `current` names now, under Oribi as
  # under Puma.
  def test_hup_rolls_the_workers_onto_the_new_release_as_pumas_phased_restart
    servers = { oribi: [:HUP, "--no-preload"] }
    servers[:puma] = [:USR1, "-C"] if PUMA
    servers.each do |server, (signal, *args)|
      if server == :puma # Puma 7+ preloads with workers, and then has no phased restart
        args << File.join(@dir, "puma.rb")
        File.write(args.last, "preload_app! false\n")
      end
      first = deploy(1)
      start(*args, server: server)
      result = under_load(8) do
        deploy(2)
        FileUtils.rm_rf(first)
        Process.kill(signal, @pid)
        assert_serves("r2", "#{server}: #{signal} after the switch")
      end
      if server == :oribi
        assert_clean(result, "#{server}: #{signal} deploy")
      else # the baseline: Puma's phased restart now and then answers one 500 under load
        assert_operator result[:status].except(200).values.sum, :<=, result[:requests] / 1000, "puma: #{result[:status]}"
      end
      teardown
      setup
    end
    skip "Puma's phased restart, the baseline, not run: puma is not in the bundle (the peers group)" unless PUMA
  end

  # HUP with the app preloaded (the default) kept the old release, the log
  # pointing to USR2; Puma's phased restart with a preloaded app falls back
  # to a full restart and serves the new code. HUP after a switch of
  # `current` is the hot restart now, with no failed request.
  def test_hup_after_a_switch_with_the_app_preloaded_serves_the_new_release
    deploy(1)
    start("--preload")
    result = under_load(10) do
      deploy(2)
      Process.kill(:HUP, @pid)
      assert_serves("r2", "HUP after the switch, preloaded")
    end
    assert_clean(result, "HUP deploy, preloaded")
    assert_match(/HUP: .* a hot restart \(USR2\) loads the new release/, File.read(@log))
  end

  # A release that cannot boot: the old workers go on serving from the same
  # pid, and the next deploy's USR2 goes ahead.
  def test_a_release_that_does_not_boot_leaves_the_old_one_serving
    deploy(1)
    start
    deploy(2, app: "raise 'broken release'")
    Process.kill(:USR2, @pid)
    assert wait_until(timeout: 30) { File.read(@log).include?("previous workers go on serving") }, log_tail
    assert_equal "r1", body
    deploy(3)
    Process.kill(:USR2, @pid)
    assert_serves("r3", "USR2 after a broken release")
    assert_equal [@pid], started
  end
end
