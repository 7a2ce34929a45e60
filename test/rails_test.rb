# frozen_string_literal: true

require "test_helper"
require "framework_process"
require "fileutils"
require_relative "support/sse_timing"
require_relative "support/notify_socket"

# `rails server -u oribi` on the app in test/apps/rails (ActionController
# only, no database), copied to a temporary directory because Rails writes
# tmp/ and log/ under its root.
class RailsTest < Minitest::Test
  def setup
    FrameworkProcess.require_gem(self, "railties")
    @root = Dir.mktmpdir("oribi-rails")
    FileUtils.cp_r(File.join(APPS, "rails", "."), @root)
  end

  def teardown
    FileUtils.rm_rf(@root) if @root
  end

  def rails_server(env)
    FrameworkProcess.new(env: env, chdir: @root) do |port|
      [RbConfig.ruby, "bin/rails", "server", "-u", "oribi", "-p", port.to_s, "-b", "127.0.0.1"]
    end
  end

  # `rails server` has no workers flag: WEB_CONCURRENCY sets Oribi's default.
  def check_serves_and_stops(workers)
    srv = rails_server("WEB_CONCURRENCY" => workers.to_s, "RAILS_ENV" => "development")
    res = HTTPClient.request(srv.tcp, "/hello")
    assert_equal 200, res.status, res.body
    # the bundle's Rails: 8 on Ruby 3.2 and later, 7.2 on 3.1 (Gemfile)
    assert_equal "Rails #{Gem.loaded_specs['railties'].version} on Oribi: multiprocess=#{workers > 1}", res.body
    res = HTTPClient.request(srv.tcp, "/echo", method: "POST", body: "msg=from+a+form",
                                               headers: { "Content-Type" => "application/x-www-form-urlencoded" })
    assert_equal "from a form", res.body
    assert_equal 404, HTTPClient.request(srv.tcp, "/nowhere").status
    check_live(srv)
    log = srv.log
    assert_match(/=> Booting Oribi/, log)
    assert_match(/#{workers} workers? \(\$WEB_CONCURRENCY\), env development/, log)
    assert_match(/listening on tcp:\/\/127\.0\.0\.1:#{srv.port}$/, log)
    st = srv.stop
    assert st.success?, "TERM gave #{st.inspect}:\n#{log}"
    refute File.exist?(File.join(@root, "tmp/pids/server.pid")), "rackup removes the pid file on exit"
  ensure
    srv&.stop
  end

  # ActionController::Live: each write reaches the client as it is made.
  def check_live(srv)
    s = srv.tcp
    s.write("GET /live?n=3 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    events, raw = SSETiming.read(s)
    assert_match(%r{\AHTTP/1.1 200 }, raw)
    SSETiming.assert_streamed(self, events, 3, "ActionController::Live")
    assert_equal events.map { |stamp, _| "data: #{stamp}\n\n" }.join, SSETiming.dechunk(raw)
  ensure
    s&.close
  end

  def test_prefork
    check_serves_and_stops(2)
  end

  def test_single_process
    check_serves_and_stops(1)
  end

  # Rails logs to STDOUT; under a supervisor, Docker or foreman that is a
  # file or a pipe, not a terminal. Each line is there once the response
  # is, as with Puma, not when a buffer fills or the worker exits.
  def test_app_log_lines_reach_a_file_at_once
    %w[oribi puma].each do |server|
      srv = FrameworkProcess.new(env: { "WEB_CONCURRENCY" => "2", "RAILS_ENV" => "production" }, chdir: @root) do |port|
        [RbConfig.ruby, "bin/rails", "server", "-u", server, "-p", port.to_s, "-b", "127.0.0.1"]
      end
      3.times { assert_equal 200, HTTPClient.request(srv.tcp, "/hello").status }
      assert_equal 500, HTTPClient.request(srv.tcp, "/boom").status
      assert wait_until(timeout: 1) { srv.log.scan(%r{Started GET "/hello"}).size == 3 && srv.log.include?("boom in the app") },
             "#{server}: the app's log lines are not in the file 1 s after the responses:\n#{srv.log}"
    ensure
      srv&.stop
    end
  end

  # `bin/rails restart` touches tmp/restart.txt; the server restarts with the
  # new code by running the command line Rails gave it (restart_cmd), as
  # Puma (with its tmp_restart plugin) does.
  def test_bin_rails_restart_serves_the_new_code
    %w[oribi puma].each do |server|
      File.write(File.join(@root, "VERSION"), "v1")
      File.write(File.join(@root, "config/puma.rb"), "plugin :tmp_restart\n") if server == "puma"
      # As from a shell, not from inside this test's `bundle exec`: Puma's
      # restart goes back to the environment from before Bundler.
      env = ENV.keys.grep(/\ABUNDLER_ORIG_/).to_h { |k| [k, nil] }
      srv = FrameworkProcess.new(env: env.merge("WEB_CONCURRENCY" => "1", "RAILS_ENV" => "production"), chdir: @root) do |port|
        [RbConfig.ruby, "bin/rails", "server", "-u", server, "-p", port.to_s, "-b", "127.0.0.1"]
      end
      assert_match(/\Av1 /, HTTPClient.request(srv.tcp, "/version").body)
      File.write(File.join(@root, "VERSION"), "v2")
      _, status = FrameworkProcess.capture(RbConfig.ruby, "bin/rails", "restart", chdir: @root)
      assert status.success?
      version = lambda do
        HTTPClient.request(srv.tcp, "/version")&.body
      rescue SystemCallError, IOError, Timeout::Error # a restart under way (Puma's holds its backlog while it boots)
        nil
      end
      assert wait_until(timeout: 60) { version.call&.start_with?("v2 ") }, "#{server}: still the old code:\n#{srv.log}"
      assert process_alive?(srv.pid), "#{server}: the process rails started is gone:\n#{srv.log}"
      refute_match(/invalid option/, srv.log)
    ensure
      srv&.stop
      FileUtils.rm_f(File.join(@root, "config/puma.rb"))
    end
  end

  # Under `rails server` Oribi is required only when Rails looks up its
  # Rack handler, before the app initializes: from there the new image of a
  # hot restart feeds systemd's watchdog while the app boots (10 s here,
  # longer than WatchdogSec 8 s; the margin is for Ruby's start and
  # Rails' requires before Oribi is loaded, on a loaded machine).
  def test_the_systemd_watchdog_is_fed_while_a_hot_restart_boots_rails
    Dir.mktmpdir do |d|
      notify = NotifySocket.new(d)
      File.write(File.join(@root, "config/initializers/slow.rb"), "sleep 10\n")
      env = { "NOTIFY_SOCKET" => notify.path, "WATCHDOG_USEC" => "8000000", "WEB_CONCURRENCY" => "1",
              "RAILS_ENV" => "production" }
      srv = rails_server(env)
      assert notify.next_matching(/READY=1/, timeout: 30), srv.log
      Process.kill(:USR2, srv.pid)
      assert notify.next_matching(/RELOADING=1/, timeout: 5), srv.log
      assert notify.next_matching(/READY=1/, timeout: 60), "no READY=1 after USR2:\n#{srv.log}"
      gap = notify.longest_gap(/WATCHDOG=1/)
      puts "\nlongest gap between WATCHDOG=1 pings across a USR2 of a Rails app booting 10 s: #{gap.round(2)} s " \
           "(WatchdogSec 8 s)"
      assert_operator gap, :<, 8.0, "systemd would have killed rails mid-reload:\n#{srv.log}\n#{notify.timeline}"
    ensure
      srv&.stop
      notify&.close
    end
  end

  # Rails' development host is localhost: both loopbacks, as with Puma,
  # whatever /etc/hosts says (a browser may pick ::1).
  def test_localhost_is_both_loopbacks_as_with_puma
    skip "no IPv6 loopback here" unless Socket.ip_address_list.any? { |a| a.ip_address == "::1" }
    %w[oribi puma].each do |server|
      srv = FrameworkProcess.new(env: { "WEB_CONCURRENCY" => "1", "RAILS_ENV" => "development" }, chdir: @root) do |port|
        [RbConfig.ruby, "bin/rails", "server", "-u", server, "-p", port.to_s]
      end
      %w[127.0.0.1 ::1].each do |address|
        s = TCPSocket.new(address, srv.port)
        assert_equal 200, HTTPClient.request(s, "/hello").status, "#{server} on #{address}"
        s.close
      end
    ensure
      srv&.stop
    end
  end

  # With no thread count anywhere, a Rails app gets what Rails' own
  # config/puma.rb gives Puma (3): two open event streams leave a thread
  # for /hello, as under Puma.
  def test_a_rails_app_gets_rails_threads_when_none_is_configured
    %w[oribi puma].each do |server|
      env = { "WEB_CONCURRENCY" => "1", "RAILS_ENV" => "production", "RAILS_MAX_THREADS" => nil, "ORIBI_THREADS" => nil }
      srv = FrameworkProcess.new(env: env, chdir: @root) do |port|
        [RbConfig.ruby, "bin/rails", "server", "-u", server, "-p", port.to_s, "-b", "127.0.0.1"]
      end
      streams = Array.new(2) do
        srv.tcp.tap do |s|
          s.write("GET /live?n=20 HTTP/1.1\r\nHost: t\r\n\r\n")
          assert s.wait_readable(10), "#{server}: the stream did not start" # its first event is out: a thread holds it
        end
      end
      t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      assert_equal 200, HTTPClient.request(srv.tcp, "/hello").status
      took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t
      # 20 events 0.4 s apart hold a lone thread for 7.6 s
      assert_operator took, :<, 2.0, "#{server}: /hello waited #{took.round(2)} s behind two event streams"
    ensure
      streams&.each(&:close)
      srv&.stop
    end
  end

  # docs/RAILS.md's config/oribi.rb, as it is (its paths moved here), on a
  # Rails app: it serves with preload on and off (a hook that named
  # ActiveRecord before the app loaded crash-looped without preload).
  def test_the_config_of_docs_rails_md_serves_preloaded_or_not
    doc = File.read(File.join(ROOT, "docs/RAILS.md"))
    text = doc[/^## config\/oribi\.rb\n\n```ruby\n(.*?)```/m, 1] or flunk "no config/oribi.rb block in docs/RAILS.md"
    FileUtils.mkdir_p(File.join(@root, "log")) # as in every Rails app
    [true, false].each do |preload|
      srv = FrameworkProcess.new(env: { "RAILS_ENV" => "production" }, chdir: @root) do |port|
        conf = text.sub("unix:///run/app/oribi.sock", "tcp://127.0.0.1:#{port}")
                   .sub("unix:///run/app/control.sock", "unix://#{@root}/tmp/control.sock")
        File.write(File.join(@root, "config/oribi.rb"), "#{conf}preload_app #{preload}\n")
        [RbConfig.ruby, "bin/rails", "server", "-u", "oribi"]
      end
      assert_equal 200, HTTPClient.request(srv.tcp, "/hello")&.status, srv.log
      assert wait_until { File.exist?(File.join(@root, "log/access.log")) }
      refute_match(/failed|NameError/, srv.log)
    ensure
      srv&.stop
    end
  end
end
