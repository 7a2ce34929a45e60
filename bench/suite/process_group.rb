# frozen_string_literal: true

require "socket"
require "oribi/tune/resources"

module Bench
  module Suite
    # A server started in its own process group: booted, probed until it
    # answers, measured through /proc (CPU time and RSS of its processes),
    # and stopped with TERM then KILL to the whole group.
    class ProcessGroup
      BOOT_TIMEOUT = 30
      STOP_TIMEOUT = 10

      attr_reader :pid, :log

      def initialize(argv, env:, log:, chdir:)
        @log = log
        @pid = Process.spawn(env, *argv, chdir: chdir, pgroup: true, in: File::NULL,
                                         out: log, err: log)
        @reaped = false
      end

      # nil when a few requests in a row got a 2xx (with prefork servers the
      # first answer can come while another worker is still booting), else
      # why not.
      def wait_ready(target, request, timeout: BOOT_TIMEOUT)
        deadline = now + timeout
        ok = 0
        while now < deadline
          return "exited with status #{$?.exitstatus.inspect}" if exited?

          ok = self.class.probe(target, request) ? ok + 1 : 0
          return nil if ok >= 4

          sleep(ok.zero? ? 0.1 : 0.02)
        end
        "no answer within #{timeout}s"
      end

      # One request (with Connection: close) read to its end; true on a 2xx.
      def self.probe(target, request)
        sock = target[:unix_path] ? UNIXSocket.new(target[:unix_path]) : TCPSocket.new(target[:host], target[:port])
        sock.write(request)
        reply = +""
        while IO.select([sock], nil, nil, 2)
          chunk = sock.read_nonblock(65_536, exception: false)
          break if chunk.nil?

          reply << chunk unless chunk == :wait_readable
        end
        reply[0, 12].match?(%r{\AHTTP/1\.[01] 2\d\d})
      rescue SystemCallError, IOError
        false
      ensure
        sock&.close
      end

      # { pid => [cpu seconds, rss bytes] } for the group's processes.
      def stats
        Dir.glob("/proc/[0-9]*/stat").each_with_object({}) do |f, h|
          fields = Oribi::Tune::Resources.stat_fields(File.read(f))
          next unless fields[2].to_i == @pid

          pid = f[%r{/proc/(\d+)/}, 1].to_i
          h[pid] = [(fields[11].to_i + fields[12].to_i) / Oribi::Tune::Resources::TICK, fields[21].to_i * 4096]
        rescue SystemCallError
          next
        end
      end

      def stop
        signal(:TERM)
        deadline = now + STOP_TIMEOUT
        sleep 0.05 while now < deadline && !exited?
        signal(:KILL) # workers that outlived their master too
        Process.waitpid(@pid) unless exited?
      rescue Errno::ECHILD
        nil
      end

      def exited?
        @reaped ||= !Process.waitpid(@pid, Process::WNOHANG).nil?
      rescue Errno::ECHILD
        @reaped = true
      end

      def tail(n = 5)
        File.exist?(@log) ? File.readlines(@log).reject { |l| l.start_with?("WARN: ", "      ") }.last(n) : []
      end

      private

      def signal(sig)
        Process.kill(sig, -@pid)
      rescue Errno::ESRCH, Errno::EPERM
        nil
      end

      def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
