# frozen_string_literal: true

require "test_helper"

# A server started by a framework's own command (rackup, a Sinatra script,
# `rails server`) instead of exe/oribi: the same readiness wait on the TCP
# port and the same TERM-then-KILL stop as ServerProcess.
class FrameworkProcess < ServerProcess
  # A framework boots its app before the port accepts: Rails takes seconds
  # alone, a minute on a 2-core machine other test files keep busy.
  BOOT_TIMEOUT = 60

  # The block is given a free port and returns the command; the bundle of
  # this repo is used whatever the working directory. ready: false for a
  # process that may be gone before a readiness probe would see it; spawn:
  # more Process.spawn options (unsetenv_others: true for an app with a
  # bundle of its own); boot_timeout: for one that does more before it
  # listens (a container's entrypoint preparing the database).
  def initialize(env: {}, chdir: ROOT, ready: true, spawn: {}, boot_timeout: BOOT_TIMEOUT) # rubocop:disable Lint/MissingSuper -- spawns its own command
    @dir = Dir.mktmpdir("oribi-test")
    @sock = File.join(@dir, "none") # each_transport: no unix socket here
    @log_path = File.join(@dir, "log")
    @port = free_port
    cmd = yield(@port)
    env = { "BUNDLE_GEMFILE" => File.join(ROOT, "Gemfile") }.merge(env)
    @group = Oribi::ProcessGroup.new(cmd, env: env, log: @log_path, chdir: chdir, **spawn)
    return unless ready

    begin
      wait_ready(boot_timeout)
    rescue StandardError
      stop(:KILL) # the error carries the log; no server outlives its test
      raise
    end
  end

  # A command that should exit by itself (a help text, a refused option):
  # its combined output and status, or a failure if it is still running
  # after timeout (it may have started a server after all).
  def self.capture(*cmd, timeout: 20, chdir: ROOT)
    out, _, status = run_command(*cmd, env: { "BUNDLE_GEMFILE" => File.join(ROOT, "Gemfile") }, timeout: timeout,
                                       chdir: chdir, merge: true)
    [out, status]
  end

  # Skips the test when the bundle was installed without the :ecosystem group.
  def self.require_gem(test, name)
    Gem::Specification.find_by_name(name)
  rescue Gem::MissingSpecError
    test.skip("#{name} is not in the bundle (bundle config without ecosystem?)")
  end
end
