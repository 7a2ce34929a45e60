# frozen_string_literal: true

require "rbconfig"
require "tmpdir"
require "fileutils"
require "socket"
require "oribi/extension"
require "oribi/process_group"

module Oribi
  module Tune
    # One server for one setting: Oribi (`exe/oribi -w W -t T`), Puma
    # (`puma -w W -t T:T`) or Unicorn (`worker_processes W`, one thread),
    # on a unix socket in a fresh directory, an Oribi::ProcessGroup (its
    # log shown when it fails to boot). Ready when the socket accepts and
    # all W workers (the master's children) are running.
    class Server
      class BootError < StandardError; end

      # the server gem's command (its root: a checkout's, or the installed gem's)
      EXE = File.join(Extension::ROOT, "exe/oribi")
      KINDS = %w[oribi puma unicorn].freeze
      # How to run a setting by hand, per server: shown with the recommendation.
      RUN_WITH = { "oribi" => "oribi -w {workers} -t {threads}", "puma" => "puma -w {workers} -t {threads}:{threads}",
                   "unicorn" => "unicorn with worker_processes {workers}" }.freeze

      # template with {workers} and {threads} replaced.
      def self.fill(template, workers, threads) = template.gsub("{workers}", workers.to_s).gsub("{threads}", threads.to_s)

      attr_reader :sock, :workers, :threads

      def initialize(rackup, workers:, threads:, environment: "production", kind: "oribi", boot_timeout: 60)
        @dir = Dir.mktmpdir("oribi-tune")
        @sock = File.join(@dir, "s.sock")
        @log = File.join(@dir, "log")
        @workers = workers
        @threads = threads
        @group = ProcessGroup.new(command(kind, File.expand_path(rackup), environment), log: @log)
        wait_ready(boot_timeout)
      rescue StandardError
        stop
        raise
      end

      def command(kind, rackup, environment)
        case kind
        when "oribi"
          [RbConfig.ruby, EXE, "-w", @workers.to_s, "-t", @threads.to_s, "-E", environment, "-b", "unix://#{@sock}", rackup]
        when "puma"
          [RbConfig.ruby, Gem.bin_path("puma", "puma"), "-w", @workers.to_s, "-t", "#{@threads}:#{@threads}", "-e", environment,
           "-b", "unix://#{@sock}", rackup]
        when "unicorn"
          File.write(conf = File.join(@dir, "unicorn.conf"), "worker_processes #{@workers}\n")
          [RbConfig.ruby, Gem.bin_path("unicorn", "unicorn"), "-E", environment, "-l", @sock, "-c", conf, rackup]
        end
      rescue Gem::GemNotFoundException => e
        raise BootError, "#{kind} is not installed (#{e.message.lines.first.chomp})"
      end

      # --apply: the user's command for a setting, {workers} and {threads}
      # replaced, run to its end (bounded by timeout); raises BootError
      # with its last lines when it fails.
      def self.apply(cmd, workers:, threads:, timeout: 60)
        line = fill(cmd, workers, threads)
        out = +""
        # Its output is read to its end: a server it starts in the
        # background must not hold the pipe (redirect it: `… > log 2>&1 &`).
        IO.popen(["sh", "-c", line, { err: %i[child out], in: File::NULL, pgroup: true }]) do |io|
          reader = Thread.new { out << io.read }
          unless reader.join(timeout)
            Process.kill(:KILL, -io.pid)
            raise BootError, "--apply did not finish in #{timeout}s: #{line}"
          end
        end
        status = $?
        raise BootError, "--apply failed (#{status.exitstatus || status}): #{line}\n#{out.lines.last(5).join}" unless status.success?

        line
      end

      def pid = @group.pid
      def worker_pids = @group.worker_pids
      def pids = [pid, *worker_pids]
      def log = @group.log

      # TERM, then KILL to what is left after timeout; idempotent.
      def stop(timeout: 10)
        @group&.stop(timeout: timeout)
      ensure
        FileUtils.rm_rf(@dir)
      end

      private

      def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

      def wait_ready(timeout)
        deadline = now + timeout
        loop do
          raise BootError, "server exited while booting:\n#{@group.tail(10).join}" if @group.exited?
          return if accepting? && worker_pids.size >= @workers
          raise BootError, "server not ready in #{timeout}s:\n#{@group.tail(10).join}" if now > deadline

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
