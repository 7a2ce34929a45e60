# frozen_string_literal: true

require "rbconfig"
require "tmpdir"
require "fileutils"
require "socket"
require "oribi/tune/resources"

module Oribi
  module Tune
    # One Oribi server for one setting: `exe/oribi -w W -t T` on a unix
    # socket in a fresh directory, its own process group, its output in a
    # log file (shown when it fails to boot). Ready when the socket accepts
    # and all W workers are running.
    class Server
      class BootError < StandardError; end

      EXE = File.expand_path("../../../exe/oribi", __dir__)

      attr_reader :pid, :sock, :workers, :threads

      def initialize(rackup, workers:, threads:, environment: "production", args: [], boot_timeout: 60)
        @dir = Dir.mktmpdir("oribi-tune")
        @sock = File.join(@dir, "s.sock")
        @log = File.join(@dir, "log")
        @workers = workers
        @threads = threads
        cmd = [RbConfig.ruby, EXE, "-w", workers.to_s, "-t", threads.to_s, "-E", environment,
               "-b", "unix://#{@sock}", *args, File.expand_path(rackup)]
        @pid = Process.spawn(*cmd, %i[out err] => @log, in: File::NULL, pgroup: true)
        wait_ready(boot_timeout)
      rescue StandardError
        stop
        raise
      end

      def worker_pids = Resources.children(@pid)
      def pids = [@pid, *worker_pids]

      def log = File.exist?(@log) ? File.read(@log) : ""

      # TERM, then KILL to the process group after timeout; idempotent.
      def stop(timeout: 10)
        return unless @pid && !@stopped

        @stopped = true
        begin
          Process.kill(:TERM, @pid)
          deadline = now + timeout
          sleep 0.02 until Process.wait(@pid, Process::WNOHANG) || now > deadline
        rescue Errno::ESRCH, Errno::ECHILD
          nil
        end
        begin
          Process.kill(:KILL, -@pid) # stragglers, and the master if it hung
          Process.wait(@pid)
        rescue Errno::ESRCH, Errno::ECHILD, Errno::EPERM
          nil
        end
      ensure
        FileUtils.rm_rf(@dir) if @stopped
      end

      private

      def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

      def wait_ready(timeout)
        deadline = now + timeout
        loop do
          if Process.wait(@pid, Process::WNOHANG)
            @stopped = true
            raise BootError, "server exited while booting:\n#{log.lines.last(10).join}"
          end
          return if accepting? && worker_pids.size >= @workers
          raise BootError, "server not ready in #{timeout}s:\n#{log.lines.last(10).join}" if now > deadline

          sleep 0.05 # polling a condition (socket accepting, workers forked), bounded above
        end
      end

      def accepting?
        UNIXSocket.new(@sock).close
        true
      rescue SystemCallError
        false
      end
    end
  end
end
