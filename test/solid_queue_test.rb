# frozen_string_literal: true

require "test_helper"
require "framework_process"
require "fileutils"

# solid_queue: the master runs Solid Queue's supervisor (the real gem) for
# a Rails app whose jobs write rows to its SQLite database
# (test/apps/solid_queue): started once the workers serve, started again
# when it dies, replaced by one with the new code on a hot restart,
# stopped after the workers on TERM. Rails 8's puma.rb asks for it with
# `plugin :solid_queue if ENV["SOLID_QUEUE_IN_PUMA"]`, which Oribi used to
# ignore: the app booted and its jobs never ran.
class SolidQueueTest < Minitest::Test
  def setup
    FrameworkProcess.require_gem(self, "solid_queue")
    require "sqlite3"
    @root = Dir.mktmpdir("oribi-solid-queue")
    FileUtils.cp_r(File.join(APPS, "solid_queue", "."), @root)
    @db = File.join(@root, "db.sqlite3")
    @env = { "DB_PATH" => @db, "RAILS_ENV" => "production", "RACK_ENV" => nil }
    out = IO.popen(@env, [RbConfig.ruby, "db/setup.rb"], chdir: @root, err: %i[child out], &:read)
    assert $?.success?, out
  end

  def teardown
    @srv&.stop
    FileUtils.rm_rf(@root) if @root
  end

  def start(*args, config: nil)
    args = ["-C", write("oribi.rb", config), *args] if config
    @srv = ServerProcess.new(File.join(@root, "config.ru"), *args, workers: 2, unix: false, env: @env,
                                                                    spawn: { chdir: @root })
  end

  def write(name, text) = File.join(@root, name).tap { |path| File.write(path, text) }

  # The first request to a Rails app's new workers (after a hot restart)
  # on a loaded machine, whose SQLite a supervisor starting and one
  # stopping write to as well: given 30 s, and the server's log if not.
  def enqueue(id)
    sock = @srv.tcp
    sock.write("GET /enqueue?id=#{id} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
    res = HTTPClient.read_response(sock, timeout: 30)
    assert_equal 200, res&.status, "#{res&.body}\n#{@srv.log}"
  rescue Timeout::Error
    flunk "/enqueue?id=#{id}: no answer in 30 s\n#{@srv.log}"
  ensure
    sock&.close
  end

  # [pid, release] of row id once a job wrote it, or nil after timeout.
  def row(id, timeout: 30)
    wait_until(timeout: timeout, interval: 0.05) do
      db = SQLite3::Database.new(@db, readonly: true)
      db.busy_timeout = 1000
      db.execute("SELECT pid, release FROM rows WHERE id = ?", [id]).first
    ensure
      db&.close
    end
  end

  def supervisors = @srv.log.scan(/solid_queue: supervisor started, pid (\d+)/).flatten.map(&:to_i)

  def alive?(pid)
    Process.kill(0, pid)
    true
  rescue Errno::ESRCH
    false
  end

  def test_jobs_run_beside_the_workers_and_the_supervisor_is_kept_running
    start(config: "solid_queue true\n")
    assert wait_until(timeout: 30) { supervisors.size == 1 }, @srv.log
    enqueue(1)
    pid, release = row(1)
    refute_nil pid, "the job never ran\n#{@srv.log}"
    assert_equal "1", release
    refute_includes [@srv.pid, *@srv.worker_pids], pid, "a job runs in Solid Queue's processes, not in a web worker"

    first = supervisors.first
    Process.kill(:KILL, first)
    assert wait_until(timeout: 30) { supervisors.size == 2 }, @srv.log
    assert_match(/solid_queue: supervisor pid #{first} was killed by SIGKILL; starting it again/, @srv.log)
    enqueue(2)
    refute_nil row(2), "no job ran after the supervisor was started again\n#{@srv.log}"

    # TERM: the workers drain first, then the supervisor stops, and nothing is left
    latest = supervisors.last
    @srv.stop
    assert_equal 0, @srv.status.exitstatus, @srv.log
    log = @srv.log
    assert_operator log.index("draining"), :<, log.index("solid_queue: stopping the supervisor, pid #{latest}"), log
    refute alive?(latest), "the supervisor outlived the master"
  end

  # USR2: the new image starts a supervisor with the new code, then stops
  # the old one.
  def test_a_hot_restart_runs_the_jobs_with_the_new_code
    start(config: "solid_queue true\n")
    assert wait_until(timeout: 30) { supervisors.size == 1 }, @srv.log
    enqueue(1)
    assert_equal "1", row(1)&.last
    old = supervisors.first
    write("RELEASE", "2\n")
    Process.kill(:USR2, @srv.pid)
    assert wait_until(timeout: 60) { supervisors.size == 2 && !alive?(old) }, @srv.log
    enqueue(2)
    assert_equal "2", row(2)&.last, @srv.log
  end

  # Rails 8's config/puma.rb, as `rails new` writes its last line.
  def test_a_puma_config_with_the_plugin_line_runs_the_jobs
    puma = write("puma.rb", %(plugin :solid_queue if ENV["SOLID_QUEUE_IN_PUMA"]\n))
    @env["SOLID_QUEUE_IN_PUMA"] = "1"
    start("-C", puma)
    assert wait_until(timeout: 30) { supervisors.size == 1 }, @srv.log
    enqueue(7)
    refute_nil row(7), "the job never ran\n#{@srv.log}"
  end
end
