# frozen_string_literal: true

require "test_helper"
require "open3"

# A config/puma.rb as Rails generates it, and the words Puma users add to
# it, read by Oribi: each mapped to its Oribi option, or one line naming
# the Oribi way for the few it has no use for.
class PumaConfigTest < Minitest::Test
  RAILS_PUMA_RB = <<~RUBY
    threads_count = ENV.fetch("RAILS_MAX_THREADS", 3)
    threads threads_count, threads_count
    port ENV.fetch("PORT", 3000)
    plugin :tmp_restart
    pidfile ENV["PIDFILE"] if ENV["PIDFILE"]
  RUBY

  def load(text, env = {})
    Dir.mktmpdir do |d|
      path = File.join(d, "puma.rb")
      File.write(path, text)
      old = env.to_h { |k, _| [k, ENV[k]] }
      env.each { |k, v| ENV[k] = v }
      begin
        return capture_log { Oribi::Config.load(config_file: path) }
      ensure
        old.each { |k, v| ENV[k] = v }
      end
    end
  end

  # → [config, what it logged]
  def capture_log
    r, w = IO.pipe
    old = $stderr.dup
    $stderr.reopen(w)
    config = yield
    $stderr.reopen(old)
    w.close
    [config, r.read]
  ensure
    $stderr.reopen(old) if old && !old.closed?
    r&.close
  end

  def test_the_config_rails_generates
    c, log = load(RAILS_PUMA_RB, "RAILS_MAX_THREADS" => "5", "PORT" => nil, "PIDFILE" => nil)
    assert_equal 5, c[:threads]
    assert_equal ["tcp://0.0.0.0:3000"], c[:binds]
    assert_equal "tmp/restart.txt", c[:restart_file]
    refute_match(/tmp_restart/, log)
  end

  def test_common_words
    c, log = load(<<~RUBY, "WEB_CONCURRENCY" => nil)
      workers 3
      threads 2, 8
      preload_app!
      environment "production"
      port 4000, "127.0.0.1"
      bind "unix:///tmp/app.sock"
      pidfile "/tmp/app.pid"
      stdout_redirect "/tmp/out.log", "/tmp/err.log", true
      persistent_timeout 15
      first_data_timeout 12
      worker_shutdown_timeout 40
      worker_timeout 90
      on_worker_boot { |index| "boot \#{index}" }
      on_worker_shutdown { "bye" }
      queue_requests false
    RUBY
    assert_equal 3, c[:workers]
    assert_equal 8, c[:threads]
    assert_match(/threads 2, 8: .* a fixed 8/, log)
    assert c[:preload_app]
    assert_equal "production", c[:environment]
    assert_equal ["tcp://127.0.0.1:4000", "unix:///tmp/app.sock"], c[:binds]
    assert_equal "/tmp/app.pid", c[:pid_file]
    assert_equal ["/tmp/out.log", "/tmp/err.log"], %i[stdout_path stderr_path].map { |k| c[k] }
    assert_equal [15, 12, 40, 90], %i[keepalive_timeout header_timeout shutdown_timeout worker_timeout].map { |k| c[k] }
    assert_equal "boot 2", c.hook(:after_fork, nil, 2)
    assert_equal "bye", c.hook(:before_worker_exit, nil, 0)
    assert_match(/queue_requests false is Puma's: /, log)
  end

  def test_a_typo_is_still_an_error
    e = assert_raises(Oribi::Config::Error) { load("wokers 2\n") }
    assert_match(/unknown option `wokers'/, e.message)
  end

  # Puma's early_hints turns on Oribi's (off by default, as in Puma).
  def test_early_hints
    refute load("")[0][:early_hints]
    assert load("early_hints\n")[0][:early_hints]
    refute load("early_hints false\n")[0][:early_hints]
  end

  def test_rails_max_threads_is_the_default_after_oribi_threads
    assert_equal 5, load("", "RAILS_MAX_THREADS" => "5", "ORIBI_THREADS" => nil)[0][:threads]
    assert_equal 2, load("", "RAILS_MAX_THREADS" => "5", "ORIBI_THREADS" => "2")[0][:threads]
    assert_equal 1, load("", "RAILS_MAX_THREADS" => nil, "ORIBI_THREADS" => nil)[0][:threads]
  end

  # The whole way: `oribi -C config/puma.rb` serves.
  def test_a_server_runs_on_a_puma_config
    Dir.mktmpdir do |d|
      conf = File.join(d, "puma.rb")
      File.write(conf, "#{RAILS_PUMA_RB}preload_app!\nworkers 1\n")
      srv = ServerProcess.new("env.ru", "-C", conf, workers: nil, tcp: true, unix: false,
                                                   env: { "RAILS_MAX_THREADS" => "2" })
      res = HTTPClient.request(srv.tcp, "/")
      assert_equal 200, res.status
      assert_match(/, 1 worker, /, srv.log) # workers 1 from the file
      assert_equal 1, srv.worker_pids.size
    ensure
      srv&.stop
    end
  end
end
