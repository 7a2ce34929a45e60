# frozen_string_literal: true

require "fileutils"
require "socket"
require "tmpdir"
require_relative "process"

# A real proxy (nginx, haproxy, Varnish, ...) a test starts in front of
# Oribi: clients on 127.0.0.1:PORT, its files in a tmpdir of its own, run
# in the foreground in its own process group, stopped with TERM then KILL. A subclass writes
# its config and says how to start it (the block given to super).
class ProxyProcess
  attr_reader :port, :dir

  # The block gets the tmpdir and returns the command line; env: more
  # variables for the proxy (set once the block has run, so it may fill
  # them in with paths in the tmpdir).
  def initialize(name, env: {})
    @name = name
    @dir = Dir.mktmpdir("oribi-#{name}")
    @port = free_port
    @log = File.join(@dir, "#{name}.out")
    # Without the sanitizer runtime the suite may preload into the servers
    # (rake test:tsan_ruby): the proxy is not the code under test, and
    # ThreadSanitizer once reported a race inside haproxy's own threads.
    cmd = yield(@dir)
    @group = Oribi::ProcessGroup.new(cmd, log: @log, env: { "LD_PRELOAD" => nil }.merge(env))
    ready = wait_until(timeout: 10) { listens_on?(@group, @port) }
    return if ready

    text = log # before stop removes the tmpdir: no proxy outlives its test
    stop
    raise "#{name} did not start:\n#{text}"
  end

  # What it printed, and the files it logs to.
  def log = log_files.select { |f| File.exist?(f) }.map { |f| File.read(f) }.join
  def tcp = TCPSocket.new("127.0.0.1", @port)

  def stop
    @group.stop(timeout: 10)
    FileUtils.rm_rf(@dir)
  end

  private

  def log_files = [@log]
end
