# frozen_string_literal: true

require "test_helper"
require "open3"

# Where options come from (defaults, environment, config file, command
# line, later wins) and what a mistake looks like.
class ConfigTest < Minitest::Test
  def with_file(text)
    Dir.mktmpdir do |d|
      path = File.join(d, "oribi.rb")
      File.write(path, text)
      yield path, d
    end
  end

  def with_env(vars)
    old = vars.to_h { |k, _| [k, ENV[k]] }
    vars.each { |k, v| ENV[k] = v }
    yield
  ensure
    old.each { |k, v| ENV[k] = v }
  end

  def test_file_then_command_line
    with_file(<<~RUBY) do |path|
      workers 3
      bind "unix:///tmp/a.sock"
      bind "tcp://127.0.0.1:9999"
      keepalive_timeout 7
      max_requests 500
    RUBY
      c = Oribi::Config.load(config_file: path, workers: 1)
      assert_equal 1, c[:workers] # the command line wins
      assert_equal ["unix:///tmp/a.sock", "tcp://127.0.0.1:9999"], c[:binds]
      assert_equal 7, c[:keepalive_timeout]
      assert_equal 500, c[:max_requests]
      assert_equal 30, c[:header_timeout] # untouched: the default
    end
  end

  def test_environment_variables
    with_env("PORT" => "8123", "WEB_CONCURRENCY" => "5", "ORIBI_THREADS" => "4") do
      c = Oribi::Config.load({})
      assert_equal ["tcp://0.0.0.0:8123"], c[:binds]
      assert_equal 5, c[:workers]
      assert_equal 4, c[:threads]
      assert_equal 2, Oribi::Config.load(workers: 2)[:workers]
    end
    with_env("ORIBI_THREADS" => "many") do
      e = assert_raises(Oribi::Config::Error) { Oribi::Config.load({}) }
      assert_match(/ORIBI_THREADS="many" is not an integer/, e.message)
    end
  end

  def test_hooks_are_blocks
    with_file("after_fork { |server, i| :forked }\n") do |path|
      c = Oribi::Config.load(config_file: path)
      assert_equal :forked, c.hook(:after_fork, nil, 0)
      assert_nil c.hook(:before_fork, nil, 0)
    end
  end

  # Oribi's own config speaks Oribi: `threads` is its option, not a Puma
  # word to report, and a TLS bind's files are read as at boot (c.pem is
  # not there: the check says so), not its parameters complained about.
  def test_an_oribi_config_with_a_tls_bind_reads_its_files
    with_file(%(threads 4\nbind "ssl://127.0.0.1:9443?cert=c.pem&key=k.pem"\n)) do |path, dir|
      File.write(File.join(dir, "config.ru"), "run ->(_) { [200, {}, []] }\n")
      out, status = Open3.capture2e(RbConfig.ruby, "-I#{ROOT}/lib", "#{ROOT}/exe/oribi", "--check-config", path, chdir: dir)
      refute status.success?, out
      assert_match(%r{ssl://127\.0\.0\.1:9443: cannot read the certificate in c\.pem}, out)
      refute_match(/Puma|unknown parameter/, out)
    end
  end

  def test_unknown_option_names_file_and_line
    with_file("workers 2\nwokers 3\n") do |path|
      e = assert_raises(Oribi::Config::Error) { Oribi::Config.load(config_file: path) }
      assert_equal "#{path}:2: unknown option `wokers'", e.message
    end
  end

  def test_bad_value
    with_file("keepalive_timeout(-1)\n") do |path|
      e = assert_raises(Oribi::Config::Error) { Oribi::Config.load(config_file: path) }
      assert_match(/:1: invalid value for keepalive_timeout: -1/, e.message)
    end
    e = assert_raises(Oribi::Config::Error) { Oribi::Config.load(access_log_format: "xml") }
    assert_match(/expected combined, ltsv or json/, e.message)
    e = assert_raises(Oribi::Config::Error) { Oribi::Config.load(max_requests: 10, min_requests: 20) }
    assert_match(/min_requests \(20\) is above max_requests \(10\)/, e.message)
  end

  # What the engine (C) or the kernel cannot hold is refused by the table,
  # where --check-config sees it, not after the fork (a max_connections
  # past 32 bits once passed the check and stopped every worker).
  def test_values_past_what_the_engine_holds_are_refused_by_the_table
    { max_connections: 2**32, keepalive_requests: 2**32, min_body_rate: 2**32, max_body: 2**63,
      max_request_line: 2**63, backlog: 2**31 }.each do |name, value|
      e = assert_raises(Oribi::Config::Error, name) { Oribi::Config.load(name => value) }
      assert_match(/invalid value for #{name}: #{value} \(expected an integer \d+\.\.#{value - 1}\)/, e.message)
      Oribi::Config.load(name => value - 1) # the largest one passes
    end
  end

  def test_user_needs_workers
    e = assert_raises(Oribi::Config::Error) { Oribi::Config.load(user: "nobody", workers: 0) }
    assert_match(/user nobody is for workers/, e.message)
    assert_equal "nobody", Oribi::Config.load(user: "nobody", workers: 1)[:user]
    e = assert_raises(Oribi::Config::Error) { Oribi::Privileges.parse("no-such-user-here") }
    assert_match(/no such user/, e.message)
  end

  def test_syntax_error
    with_file("workers 2\nbind 'x\n") do |path|
      e = assert_raises(Oribi::Config::Error) { Oribi::Config.load(config_file: path) }
      assert_match(/\A#{Regexp.escape(path)}:\d+: /, e.message)
    end
  end

  def test_bad_config_exits_nonzero_with_one_line
    with_file("workers 'two'\n") do |path|
      _, err, st = Open3.capture3(RbConfig.ruby, File.join(ROOT, "exe/oribi"), "-C", path,
                                  File.join(APPS, "env.ru"))
      refute st.success?
      assert_equal 1, err.lines.size, err
      assert_match(/\Aoribi: #{Regexp.escape(path)}:1: invalid value for workers: "two"/, err)
    end
  end

  def test_config_file_drives_a_real_server_and_its_hooks
    Dir.mktmpdir do |dir|
      path = File.join(dir, "oribi.rb")
      File.write(path, <<~RUBY)
        workers 2
        bind "unix://#{dir}/cfg.sock"
        before_fork { |_server, i| File.write("#{dir}/before_fork-\#{i}", Process.pid.to_s) }
        after_fork { |_server, i| File.write("#{dir}/after_fork-\#{i}", Process.pid.to_s) }
        after_worker_boot { |_server, i| File.write("#{dir}/boot-\#{i}", Process.pid.to_s) }
        before_worker_exit { |_server, i| File.write("#{dir}/exit-\#{i}", Process.pid.to_s) }
      RUBY
      srv = ServerProcess.new("env.ru", "-C", path, "-w", "1", workers: nil, tcp: false, unix: false,
                                                              sock: "#{dir}/cfg.sock")
      assert wait_until { File.exist?("#{dir}/boot-0") }
      assert_equal 1, srv.worker_pids.size, "the command line's -w 1 must win over the file's 2"
      worker = srv.worker_pids.first
      assert_equal srv.pid.to_s, File.read("#{dir}/before_fork-0") # in the master
      assert_equal worker.to_s, File.read("#{dir}/after_fork-0")    # in the worker
      assert_equal worker.to_s, File.read("#{dir}/boot-0")
      assert srv.stop.success?
      assert_equal worker.to_s, File.read("#{dir}/exit-0")
    ensure
      srv&.stop
    end
  end
end
