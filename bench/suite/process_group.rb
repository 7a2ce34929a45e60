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

      # { pid => [cpu seconds, rss bytes] } for the server's processes: its
      # whole tree (Pitchfork's workers are children of a mold, in a session
      # of their own) and whatever else is in its process group. CPU counts
      # the children each process has reaped, so a worker that exited
      # between two readings still counts, once, in its parent's.
      def stats
        members.transform_values do |f|
          [f[11, 4].sum(&:to_i) / Oribi::Tune::Resources::TICK, f[21].to_i * 4096] # u, s, cu, cs time; rss
        end
      end

      # TERM to the group, then KILL to the group and to the processes of
      # the tree that left it (the same processes: same start time).
      def stop
        tree = members.except(@pid).transform_values { |f| f[19] }
        signal(:TERM)
        deadline = now + STOP_TIMEOUT
        sleep 0.05 while now < deadline && !exited?
        signal(:KILL) # workers that outlived their master too
        tree.each { |pid, started| kill_if(pid, started) }
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

      # { pid => stat fields } of the processes under @pid (by parent) and
      # in its group.
      def members
        procs = Dir.glob("/proc/[0-9]*/stat").each_with_object({}) do |f, h|
          h[f[%r{/proc/(\d+)/}, 1].to_i] = Oribi::Tune::Resources.stat_fields(File.read(f))
        rescue SystemCallError
          next
        end
        kids = procs.group_by { |_, f| f[1].to_i }.transform_values { |l| l.map(&:first) }
        found = procs.filter_map { |pid, f| pid if pid == @pid || f[2].to_i == @pid }
        queue = found.dup
        while (pid = queue.shift)
          (kids[pid] || []).each do |k|
            next if found.include?(k)

            found << k
            queue << k
          end
        end
        procs.slice(*found)
      end

      def kill_if(pid, started)
        Process.kill(:KILL, pid) if Oribi::Tune::Resources.stat_fields(File.read("/proc/#{pid}/stat"))[19] == started
      rescue SystemCallError
        nil
      end

      def signal(sig)
        Process.kill(sig, -@pid)
      rescue Errno::ESRCH, Errno::EPERM
        nil
      end

      def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
