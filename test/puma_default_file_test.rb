# frozen_string_literal: true

require "test_helper"
require "framework_process"
require "fileutils"

# An app moved from Puma keeps its config/puma.rb. With no config/oribi.rb
# beside it, every command that starts Oribi reads it as Puma would
# (`oribi`, `rackup -s oribi`, `rails server -u oribi`): its workers, its
# threads, its pidfile, the Ruby of its hooks; and the boot line names the
# file read, or says there was none. Under `rails server` it was skipped
# without a word: Oribi's defaults served, no pidfile, no hook ran.
class PumaDefaultFileTest < Minitest::Test
  PUMA_RB = <<~RUBY
    workers 2
    threads 5, 5
    pidfile "tmp/puma-pidfile"
    on_worker_boot { |index| File.write("tmp/booted-\#{index}", Process.pid.to_s) }
  RUBY

  def setup
    @dir = Dir.mktmpdir("oribi-puma-app")
    FileUtils.mkdir_p(File.join(@dir, "tmp"))
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def write_app(dir = @dir)
    FileUtils.mkdir_p(File.join(dir, "config"))
    File.write(File.join(dir, "config/puma.rb"), PUMA_RB)
    File.write(File.join(dir, "config.ru"), "run ->(env) { [200, {}, [\"pid \#{Process.pid}\"]] }\n") unless
      File.exist?(File.join(dir, "config.ru"))
  end

  # The file's workers, threads, pidfile and hooks, each seen from outside.
  def assert_ran_as_puma_would(srv, dir, how, path: "/")
    assert_equal 200, HTTPClient.request(srv.tcp, path).status
    log = srv.log
    assert_match(/2 workers, .*5 threads per worker, config config\/puma\.rb \(Puma's\)/, log, how)
    assert wait_until(timeout: 10) { srv.worker_pids.size == 2 }, "#{how}: not 2 workers\n#{log}"
    pidfile = File.join(dir, "tmp/puma-pidfile")
    assert wait_until { File.exist?(pidfile) }, "#{how}: no pidfile\n#{log}"
    assert_equal srv.pid, File.read(pidfile).to_i, how
    booted = wait_until { (files = Dir[File.join(dir, "tmp/booted-*")]).size == 2 && files }
    assert booted, "#{how}: on_worker_boot did not run in both workers\n#{log}"
    assert_equal srv.worker_pids.sort, booted.map { |f| File.read(f).to_i }.sort, how
  end

  def test_oribi_reads_config_puma_rb
    write_app
    srv = ServerProcess.new("./config.ru", workers: nil, unix: false, spawn: { chdir: @dir },
                                           env: { "WEB_CONCURRENCY" => nil, "ORIBI_THREADS" => nil })
    assert_ran_as_puma_would(srv, @dir, "oribi")
  ensure
    srv&.stop
  end

  def test_rackup_reads_config_puma_rb
    write_app
    srv = FrameworkProcess.new(chdir: @dir, env: { "WEB_CONCURRENCY" => nil, "ORIBI_THREADS" => nil }) do |port|
      [RbConfig.ruby, Gem.bin_path("rackup", "rackup"), "-s", "oribi", "-o", "127.0.0.1", "-p", port.to_s, "config.ru"]
    end
    assert_ran_as_puma_would(srv, @dir, "rackup")
  ensure
    srv&.stop
  end

  # Rails 8's Dockerfile: `./bin/thrust ./bin/rails server`, the handler
  # picked by RACKUP_HANDLER (or -u).
  def test_rails_server_reads_config_puma_rb
    FrameworkProcess.require_gem(self, "railties")
    FileUtils.cp_r(File.join(APPS, "rails", "."), @dir)
    write_app
    env = { "WEB_CONCURRENCY" => nil, "ORIBI_THREADS" => nil, "RAILS_ENV" => "production", "RACKUP_HANDLER" => "oribi" }
    srv = FrameworkProcess.new(env: env, chdir: @dir) do |port|
      [RbConfig.ruby, "bin/rails", "server", "-u", "oribi", "-p", port.to_s, "-b", "127.0.0.1"]
    end
    assert_ran_as_puma_would(srv, @dir, "rails server", path: "/hello")
  ensure
    srv&.stop
  end

  def test_the_boot_line_says_when_no_file_was_read
    File.write(File.join(@dir, "config.ru"), "run ->(env) { [200, {}, []] }\n")
    srv = ServerProcess.new("./config.ru", workers: 0, unix: false, spawn: { chdir: @dir })
    assert_match(/single process, .*no config file$/, srv.log_until(/no config file/))
  ensure
    srv&.stop
  end

  # As Puma looks: config/puma/ENV.rb before config/puma.rb, and
  # config/oribi.rb before either.
  def test_which_file_is_read
    Dir.chdir(@dir) do
      assert_nil Oribi::Config.default_file("production")
      write_app
      assert_equal "config/puma.rb", Oribi::Config.default_file("production")
      FileUtils.mkdir_p("config/puma")
      File.write("config/puma/production.rb", "threads 2, 2\n")
      assert_equal "config/puma/production.rb", Oribi::Config.default_file("production")
      assert_equal "config/puma.rb", Oribi::Config.default_file("development")
      File.write("config/oribi.rb", "threads 4\n")
      assert_equal "config/oribi.rb", Oribi::Config.default_file("production")
    end
  end
end
