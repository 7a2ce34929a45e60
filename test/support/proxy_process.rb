# frozen_string_literal: true

require "fileutils"
require "socket"
require "tmpdir"
require_relative "process"

# A real proxy (nginx, haproxy) a test starts in front of Oribi: clients on
# 127.0.0.1:PORT, its files in a tmpdir of its own, run in the foreground
# in its own process group, stopped with TERM then KILL. A subclass writes
# its config and says how to start it (the block given to super).
class ProxyProcess
  attr_reader :port, :dir

  # The block gets the tmpdir and returns the command line.
  def initialize(name)
    @name = name
    @dir = Dir.mktmpdir("oribi-#{name}")
    @port = free_port
    @log = File.join(@dir, "#{name}.out")
    # Without the sanitizer runtime the suite may preload into the servers
    # (rake test:tsan_ruby): the proxy is not the code under test, and
    # ThreadSanitizer once reported a race inside haproxy's own threads.
    @group = Oribi::ProcessGroup.new(yield(@dir), log: @log, env: { "LD_PRELOAD" => nil })
    ready = wait_until(timeout: 10) { listens_on?(@group, @port) }
    raise "#{name} did not start:\n#{log}" unless ready
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
