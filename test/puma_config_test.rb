# frozen_string_literal: true

require "test_helper"
require "open3"
require "framework_process"
require "oribi/config" # Oribi::PumaWords, which the tests name before any loads a config

# A config/puma.rb as Rails generates it, and the words Puma users add to
# it, read by Oribi: each mapped to its Oribi option, or one line naming
# the Oribi way for the few it has no use for.
class PumaConfigTest < Minitest::Test
  # Puma itself, to load a config as it does: in the peers group, which
  # `bundle install` installs only when asked (README.md)
  def require_puma
    require "puma"
    require "puma/configuration"
  rescue LoadError
    skip "puma is not installed (bundle install with the peers group installs it)"
  end

  RAILS_PUMA_RB = <<~RUBY
    threads_count = ENV.fetch("RAILS_MAX_THREADS", 3)
    threads threads_count, threads_count
    port ENV.fetch("PORT", 3000)
    plugin :tmp_restart
    pidfile ENV["PIDFILE"] if ENV["PIDFILE"]
  RUBY

  def load(text, env = {}, name = "puma.rb")
    Dir.mktmpdir do |d|
      path = File.join(d, name)
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
    assert_match(/queue_requests false is Puma's, ignored: /, log)
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
    assert_equal 5, load("", { "RAILS_MAX_THREADS" => "5", "ORIBI_THREADS" => nil }, "oribi.rb")[0][:threads]
    assert_equal 2, load("", { "RAILS_MAX_THREADS" => "5", "ORIBI_THREADS" => "2" }, "oribi.rb")[0][:threads]
    assert_equal 1, load("", { "RAILS_MAX_THREADS" => nil, "ORIBI_THREADS" => nil }, "oribi.rb")[0][:threads]
  end

  # What a Puma config does not say, Puma decides: one process unless
  # WEB_CONCURRENCY, its 5 threads (PUMA_MAX_THREADS, MAX_THREADS), no
  # request deadline; Oribi's own variable still wins.
  def test_a_puma_config_gets_pumas_defaults
    bare = { "WEB_CONCURRENCY" => nil, "ORIBI_THREADS" => nil, "PUMA_MAX_THREADS" => nil, "MAX_THREADS" => nil,
             "RAILS_MAX_THREADS" => "9" }
    c, = load("", bare)
    assert_equal [1, 5, 0, 60, 60], %i[workers threads request_timeout worker_timeout worker_boot_timeout].map { |k| c[k] }
    assert_equal [3, 7], load("", bare.merge("WEB_CONCURRENCY" => "3", "MAX_THREADS" => "7"))[0].then { |x| [x[:workers], x[:threads]] }
    assert_equal 8, load("", bare.merge("PUMA_MAX_THREADS" => "8", "MAX_THREADS" => "7"))[0][:threads]
    assert_equal 2, load("", bare.merge("ORIBI_THREADS" => "2", "MAX_THREADS" => "7"))[0][:threads]
    c, = load("", bare, "oribi.rb")
    assert_equal [9, 60, 0], %i[threads request_timeout worker_boot_timeout].map { |k| c[k] }
  end

  # Puma's words are read from a Puma config only: in config/oribi.rb
  # `port` is an error that says where it belongs, and `threads 4` is
  # Oribi's own option, not a Puma word reported as one.
  def test_pumas_words_belong_to_a_puma_config
    e = assert_raises(Oribi::Config::Error) { load("port 3000\n", {}, "oribi.rb") }
    assert_match(/oribi\.rb:1: `port' is Puma's: Oribi reads Puma's words in a Puma config \(config\/puma\.rb/, e.message)
    c, log = load("threads 4\n", {}, "oribi.rb")
    assert_equal 4, c[:threads]
    assert_empty log
    assert_equal 8, load("threads 2, 8\n")[0][:threads]
    Dir.mktmpdir do |d|
      FileUtils.mkdir_p(File.join(d, "puma"))
      path = File.join(d, "puma", "production.rb")
      File.write(path, "port 3001\n")
      assert_equal ["tcp://0.0.0.0:3001"], Oribi::Config.load(config_file: path)[:binds]
    end
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

  # Every word of Puma 6, 7 and 8's config language that the issue list
  # named, and the rest Oribi notes: Puma loads the file, and so does Oribi,
  # each word mapped or logged as ignored in one line, none fatal.
  PUMA_WORDS = <<~'RUBY'
    workers 2
    threads 1, 3
    port 3000
    bind "tcp://127.0.0.1:3001?backlog=2048"
    bind "unix:///tmp/oribi-puma-words.sock?mode=0660"
    directory "/tmp"
    restart_command "bin/restart-app"
    environment "production"
    preload_app!
    plugin :tmp_restart
    before_fork { }
    before_worker_boot { |i| }
    before_worker_shutdown { |i| }
    before_worker_fork { |i| }
    after_worker_fork { |i| }
    after_booted { }
    before_restart { }
    after_stopped { }
    before_thread_start { }
    on_worker_boot { |i| }
    on_worker_shutdown { |i| }
    on_worker_fork { |i| }
    on_restart { }
    on_stopped { }
    on_booted { }
    on_thread_start { }
    drain_on_shutdown
    max_keep_alive 50
    idle_timeout 600
    enable_keep_alives true
    debug
    worker_culling_strategy :oldest
    http_content_length_limit 10_000_000
    supported_http_methods %w[GET POST]
    set_remote_address header: "X-Real-IP"
    persistent_timeout 20
    first_data_timeout 30
    worker_timeout 60
    worker_boot_timeout 60
    worker_shutdown_timeout 30
    worker_check_interval 5
    fork_worker
    queue_requests true
    wait_for_less_busy_worker
    lowlevel_error_handler { |e| [500, {}, ["x"]] }
    tag "app"
    log_requests
    quiet
    early_hints
    prune_bundler
    extra_runtime_dependencies ["x"]
    silence_single_worker_warning
    state_path "/tmp/puma.state"
    activate_control_app "tcp://127.0.0.1:9293", { auth_token: "t" }
    stdout_redirect "/tmp/oribi-puma-out.log", "/tmp/oribi-puma-err.log", true
  RUBY

  IGNORED = %w[after_worker_fork after_booted before_restart after_stopped
               on_restart on_stopped on_booted drain_on_shutdown
               debug worker_culling_strategy
               worker_check_interval fork_worker queue_requests wait_for_less_busy_worker
               tag log_requests quiet prune_bundler extra_runtime_dependencies
               silence_single_worker_warning state_path activate_control_app].freeze

  def test_the_words_of_puma_6_7_and_8_load_as_puma_loads_them
    Dir.mktmpdir do |d|
      path = File.join(d, "puma.rb")
      File.write(path, PUMA_WORDS)
      require_puma
      puma = Puma::Configuration.new({ config_files: [path] }, {}, {})
      capture_log { puma.load } # raises on a word it does not know
      puma.clamp
    end
    c, log = load(PUMA_WORDS, "WEB_CONCURRENCY" => nil)
    assert_equal ["tcp://0.0.0.0:3000", "tcp://127.0.0.1:3001", "unix:///tmp/oribi-puma-words.sock"], c[:binds]
    assert_equal [2048, 0o660, "/tmp", 50, true, 10_000_000, 3, 2],
                 %i[backlog unix_mode working_directory keepalive_requests keepalive max_body threads workers].map { |k| c[k] }
    assert_equal "tmp/restart.txt", c[:restart_file]
    assert_equal "bin/restart-app", c[:restart_command]
    assert_equal "X-Real-IP", c[:remote_addr_header]
    assert_match(/set_remote_address header: "X-Real-IP": only from a peer in trusted_proxies/, log)
    assert_match(/restart_command: Oribi runs it as it is; Puma appends/, log)
    IGNORED.each do |word|
      assert_equal 1, log.scan(/puma\.rb: #{word}\b.* is Puma's, ignored: /).size, "#{word}:\n#{log}"
    end
    assert_match(/plugin :statsd is Puma's, ignored: Puma's own metrics: Oribi's are at \/metrics/, load("plugin :statsd\n")[1])
    assert_match(/threads 1, 3: Oribi runs a fixed 3 per worker/, log)
  end

  # set_remote_address: the PROXY protocol and a header map, strictly; the
  # forms that would hide the client's address leave REMOTE_ADDR the peer.
  def test_set_remote_address
    c, log = load("set_remote_address proxy_protocol: :v1\nport 3000\n")
    assert_equal ["v1", ["tcp://0.0.0.0:3000"]], [c[:proxy_protocol], c[:binds]]
    assert_match(/set_remote_address proxy_protocol: :v1: strict: a connection without the PROXY header is closed unanswered/, log)
    assert_equal "v2", load("set_remote_address proxy_protocol: :v2\n")[0][:proxy_protocol]
    assert_match(/set_remote_address :socket is Puma's, ignored: REMOTE_ADDR is the socket's peer/,
                 load("set_remote_address :socket\n")[1])
    [":localhost", '"10.0.0.1"'].each do |form|
      c, log = load("set_remote_address #{form}\n")
      assert_match(/set_remote_address #{Regexp.escape(form)}: REMOTE_ADDR stays each client's address/, log)
      assert_equal ["off", nil], [c[:proxy_protocol], c[:remote_addr_header]]
    end
    error = assert_raises(Oribi::Config::Error) { load("set_remote_address proxy_protocol: :v3\n") }
    assert_match(/puma\.rb:1: set_remote_address proxy_protocol: :v3: Puma takes proxy_protocol: :v1/, error.message)
    # A bind's own parameter stays on its URI; Puma's go to their options.
    c, = load(%(bind "tcp://0.0.0.0:3000?backlog=5&proxy_protocol=v2"\n))
    assert_equal [["tcp://0.0.0.0:3000?proxy_protocol=v2"], 5], [c[:binds], c[:backlog]]
    error = assert_raises(Oribi::Config::Error) { load(%(bind "tcp://0.0.0.0:3000?proxy_protocol=v9"\n)) }
    assert_match(/proxy_protocol=v9: v1, v2, any or off/, error.message)
    Dir.mktmpdir do |d|
      path = File.join(d, "puma.rb")
      File.write(path, %(set_remote_address proxy_protocol: :v1\nbind "unix://#{d}/s.sock?proxy_protocol=v2"\n))
      out, status = FrameworkProcess.capture(RbConfig.ruby, File.join(ROOT, "exe/oribi"), "--check-config", path)
      assert status.success?, out
      assert_match(/^  maps +set_remote_address proxy_protocol: :v1 +→ proxy_protocol "v1"$/, out)
      assert_match(%r{^  binds unix://#{Regexp.escape(d)}/s\.sock\?proxy_protocol=v2$}, out)
    end
  end

  # Rails 8's puma.rb ends with `plugin :solid_queue if
  # ENV["SOLID_QUEUE_IN_PUMA"]` (Kamal sets it): the jobs run in Solid
  # Queue's supervisor, which Oribi's master runs (solid_queue). It was
  # ignored, and the app's jobs never ran. A plugin Oribi does not know
  # may do work that would stop as silently: it is an error, not a line.
  def test_plugins_solid_queue_maps_and_an_unknown_one_stops_the_server
    rails8 = %(plugin :tmp_restart\nplugin :solid_queue if ENV["SOLID_QUEUE_IN_PUMA"]\n)
    assert_equal true, load(rails8, "SOLID_QUEUE_IN_PUMA" => "true")[0][:solid_queue]
    assert_equal false, load(rails8, "SOLID_QUEUE_IN_PUMA" => nil)[0][:solid_queue]
    error = assert_raises(Oribi::Config::Error) { load("plugin :jobs_in_my_plugin\n") }
    assert_match(/puma\.rb:1: plugin :jobs_in_my_plugin: Oribi has no plugins and does not know what this one does/,
                 error.message)
  end

  # `workers ENV.fetch("WEB_CONCURRENCY") { 2 }`: the environment gives a
  # String, which Puma takes as the number it says.
  def test_numeric_strings_are_numbers_as_in_puma
    text = <<~RUBY
      workers ENV.fetch("WEB_CONCURRENCY") { 2 }
      threads ENV.fetch("RAILS_MAX_THREADS") { 1 }, ENV.fetch("RAILS_MAX_THREADS") { 1 }
      persistent_timeout ENV.fetch("KEEP") { 5 }
      worker_timeout "90"
      max_requests "1000"
    RUBY
    env = { "WEB_CONCURRENCY" => "3", "RAILS_MAX_THREADS" => "4", "KEEP" => "15" }
    c, = load(text.sub("max_requests \"1000\"\n", ""), env)
    Dir.mktmpdir do |d|
      path = File.join(d, "puma.rb")
      File.write(path, text.sub("max_requests \"1000\"\n", ""))
      require_puma
      puma = Puma::Configuration.new({ config_files: [path] }, {}, env)
      old = env.to_h { |k, _| [k, ENV[k]] }
      env.each { |k, v| ENV[k] = v }
      begin
        capture_log { puma.load }
      ensure
        old.each { |k, v| ENV[k] = v }
      end
      puma.clamp
      assert_equal [puma.options[:workers], puma.options[:max_threads], puma.options[:persistent_timeout]],
                   [c[:workers], c[:threads], c[:keepalive_timeout]]
    end
    c, = load(text, env)
    assert_equal [3, 4, 15, 90, 1000], %i[workers threads keepalive_timeout worker_timeout max_requests].map { |k| c[k] }
  end

  # RAILS_ENV sets the environment when APP_ENV and RACK_ENV do not, as Puma
  # reads them.
  def test_rails_env_is_read_as_puma_reads_it
    require_puma
    [{ "RAILS_ENV" => "production" }, { "RACK_ENV" => "staging", "RAILS_ENV" => "production" },
     { "APP_ENV" => "test", "RACK_ENV" => "staging" }, {}].each do |set|
      env = { "APP_ENV" => nil, "RACK_ENV" => nil, "RAILS_ENV" => nil }.merge(set)
      puma = Puma::Configuration.new({}, {}, env.compact)
      puma.clamp
      assert_equal puma.options[:environment], load("", env)[0][:environment], set.inspect
    end
    srv = ServerProcess.new("env.ru", workers: 1, unix: false, env: { "RAILS_ENV" => "production", "RACK_ENV" => nil })
    assert_match(/, env production/, srv.log_until(/, env /))
    assert_equal "production", HTTPClient.request(srv.tcp, "/").body.split.first
  ensure
    srv&.stop
  end

  # `oribi --check-config config/puma.rb`: what maps, what differs, what is
  # ignored and why, then what the server would run with; status 0.
  def test_check_config_says_what_each_word_does
    Dir.mktmpdir do |d|
      path = File.join(d, "puma.rb")
      File.write(path, PUMA_WORDS)
      out, status = FrameworkProcess.capture(RbConfig.ruby, File.join(ROOT, "exe/oribi"), "--check-config", path)
      assert status.success?, out
      assert_match(/^  maps +max_keep_alive 50 +→ keepalive_requests 50$/, out)
      assert_match(/^  differs +threads 1, 3 +Oribi runs a fixed 3 per worker$/, out)
      assert_match(/^  differs +port 3000 +Puma binds \[::\] \(IPv4 and IPv6\), Oribi 0\.0\.0\.0/, out)
      assert_match(/^  maps +idle_timeout 600 +→ idle_timeout 600$/, out)
      assert_match(/^  ignored +drain_on_shutdown +a TERM always drains/, out)
      assert_match(/^  oribi +workers 2$/, out)
      assert_match(/^Oribi would run with:\n  binds tcp:/, out)
      File.write(path, "workers \"many\"\n")
      out, status = FrameworkProcess.capture(RbConfig.ruby, File.join(ROOT, "exe/oribi"), "--check-config", path)
      assert_equal 2, status.exitstatus
      assert_match(/puma\.rb:1: invalid value for workers: "many"/, out)
    end
  end

  # A mode is said as it is written, in octal (0600 read back as 384 did not
  # look like the file's value).
  def test_check_config_says_a_mode_in_octal
    Dir.mktmpdir do |d|
      path = File.join(d, "oribi.rb")
      File.write(path, "unix_mode 0o600\nworkers 3\n")
      out, status = FrameworkProcess.capture(RbConfig.ruby, File.join(ROOT, "exe/oribi"), "--check-config", path)
      assert status.success?, out
      assert_match(/^  oribi +unix_mode 0600$/, out)
      assert_match(/^  oribi +workers 3$/, out)
      File.write(path, "unix_mode nil\n") # what the umask gives: nothing to show in octal
      out, status = FrameworkProcess.capture(RbConfig.ruby, File.join(ROOT, "exe/oribi"), "--check-config", path)
      assert status.success?, out
      assert_match(/^  oribi +unix_mode nil$/, out)
    end
  end

  # RAILS.md's example bound unix:///run/app/..., which nothing created:
  # --check-config called it fine and the server then failed to bind.
  def test_check_config_refuses_a_socket_in_a_missing_directory
    Dir.mktmpdir do |d|
      path = File.join(d, "oribi.rb")
      File.write(path, "bind \"unix://#{d}/nowhere/app.sock\"\n")
      out, status = FrameworkProcess.capture(RbConfig.ruby, File.join(ROOT, "exe/oribi"), "--check-config", path)
      assert_equal 2, status.exitstatus, out
      assert_match(%r{bind unix://#{d}/nowhere/app\.sock: the directory #{d}/nowhere does not exist}, out)
      File.write(path, "bind \"unix://#{d}/app.sock\"\n")
      out, status = FrameworkProcess.capture(RbConfig.ruby, File.join(ROOT, "exe/oribi"), "--check-config", path)
      assert status.success?, out
    end
  end

  # What the server refuses at start, --check-config refuses too, in one
  # line naming the file (DEPLOYMENT.md's host config without its token or
  # without the variable it reads).
  def test_check_config_refuses_what_the_server_would
    Dir.mktmpdir do |d|
      path = File.join(d, "oribi.rb")
      check = lambda do |env|
        out, _, status = run_command(RbConfig.ruby, File.join(ROOT, "exe/oribi"), "--check-config", path,
                                     env: env.merge("BUNDLE_GEMFILE" => File.join(ROOT, "Gemfile")), timeout: 20,
                                     merge: true)
        [out, status]
      end
      File.write(path, "control \"tcp://\#{ENV.fetch('PRIVATE_IP')}:9293\"\n")
      out, status = check.call("PRIVATE_IP" => "127.0.0.1", "ORIBI_CONTROL_TOKEN" => nil)
      assert_equal 2, status.exitstatus, out
      assert_equal "oribi: control tcp://127.0.0.1:9293 is TCP: set control_token (or ORIBI_CONTROL_TOKEN) too\n", out
      out, status = check.call("PRIVATE_IP" => "127.0.0.1", "ORIBI_CONTROL_TOKEN" => "t")
      assert status.success?, out
      out, status = check.call("PRIVATE_IP" => nil)
      assert_equal 2, status.exitstatus, out
      assert_equal "oribi: #{path}:1: key not found: \"PRIVATE_IP\"\n", out
    end
  end

  # docs/MIGRATING.md's table of Puma 8's words: every public method of
  # Puma::DSL (read from the installed Puma) is in it, and each does on
  # Oribi what its row says: sets an option, is ignored with a line, or
  # stops the server with a line saying what to do.
  def test_migrating_md_has_every_puma_8_word_and_what_it_does
    require_puma
    require "puma/dsl"
    doc = File.read(File.join(ROOT, "docs/MIGRATING.md"))[/^## Every word of Puma 8's config\n(.*?)^## /m, 1]
    said = {}
    doc.each_line.grep(/\A\| `/).each do |row|
      first, second = row.split(/(?<!\\)\|/)[1, 2].map(&:strip)
      kind = if second.start_with?("**stops") then :stops
             elsif second.start_with?("ignored") then :ignored
             else :sets
             end
      first.scan(/`([a-z_!]+)/).flatten.each { |w| said[w.to_sym] ||= kind }
    end
    puma = Puma::DSL.public_instance_methods(false)
    assert_empty puma - said.keys, "Puma 8's words docs/MIGRATING.md does not name"
    assert_empty said.keys - puma, "words docs/MIGRATING.md names that Puma 8 has not"
    assert_empty puma - Oribi::PumaWords.words - Oribi::Options::ALL.keys, "words Oribi does not read"
    said.except(:plugin, :bind).each do |word, kind|
      text = "#{word}\n"
      case kind
      when :stops
        e = assert_raises(Oribi::Config::Error, word) { load(text) }
        assert_match(/puma\.rb:1: #{Regexp.escape(word)}: .*\(docs\/MIGRATING\.md\)/, e.message)
      when :ignored
        assert_match(/#{Regexp.escape(word)}.* is Puma's, ignored: /, load(text)[1], word)
      else
        refute Oribi::PumaWords::NOTES.key?(word) || Oribi::PumaWords::REFUSED.key?(word), "#{word} is not set"
      end
    end
  end

  # The words that change what is served take effect (a server runs them
  # in puma_words_test.rb).
  def test_serving_words_set_their_options
    c, = load("supported_http_methods %w[GET PROPFIND]\nrack_url_scheme \"https\"\nidle_timeout 30\n")
    assert_equal [%w[GET PROPFIND], "https", 30], %i[http_methods url_scheme idle_timeout].map { |k| c[k] }
    assert_equal [], load("supported_http_methods :any\n")[0][:http_methods]
    assert_equal Oribi::PumaWords::HTTP_METHODS, load("")[0][:http_methods]
    assert_equal [], load("", {}, "oribi.rb")[0][:http_methods]
    assert_equal ["ssl://0.0.0.0:443?key=k&cert=c"], load("bind \"ssl://0.0.0.0:443?key=k&cert=c&low_latency=true\"\n")[0][:binds]
    assert_equal ["tcp://127.0.0.2:3000"], load("set_default_host \"127.0.0.2\"\nport 3000\n")[0][:binds]
    assert_equal 4, load("workers 4\nthreads get(:workers), get(:workers)\n")[0][:threads]
  end

end
