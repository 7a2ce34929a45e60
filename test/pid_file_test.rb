# frozen_string_literal: true

require "test_helper"

# The pid file (--pid): written whole, never through a link someone planted
# in its directory.
class PidFileTest < Minitest::Test
  # The server is exec'd by a shell that first plants a symlink at
  # "FILE.PID", the temp name the pid file used to be written under, aimed
  # at a file the server must not overwrite.
  def start_behind_planted_link(dir, workers:)
    @victim = File.join(dir, "victim")
    File.write(@victim, "precious\n")
    @pid_file = File.join(dir, "o.pid")
    plant = 'ln -s "$VICTIM" "$PID_FILE.$$" && exec "$@"'
    cmd = [RbConfig.ruby, File.join(ROOT, "exe/oribi"), "-w", workers.to_s, "-b", "unix://#{dir}/s.sock",
           "--pid", @pid_file, File.join(APPS, "env.ru")]
    env = { "VICTIM" => @victim, "PID_FILE" => @pid_file }
    @server = Oribi::ProcessGroup.new(["sh", "-c", plant, "sh", *cmd], env: env, log: File.join(dir, "log"))
  end

  def teardown
    @server&.stop(:KILL, timeout: 0)
  end

  [0, 1].each do |workers|
    define_method("test_planted_symlink_is_not_followed_with_#{workers}_workers") do
      Dir.mktmpdir("oribi-pid") do |dir|
        start_behind_planted_link(dir, workers: workers)
        written = wait_until(timeout: 20) { (File.read(@pid_file) rescue nil) } # rubocop:disable Style/RescueModifier
        assert_equal "#{@server.pid}\n", written, File.read(File.join(dir, "log"))
        assert_equal "precious\n", File.read(@victim), "the pid was written through the planted link"
        refute File.symlink?(@pid_file)
        leftovers = Dir.children(dir) - %w[victim o.pid s.sock log] - ["o.pid.#{@server.pid}"]
        assert_empty leftovers, "temp files left behind"
      end
    end
  end
end
