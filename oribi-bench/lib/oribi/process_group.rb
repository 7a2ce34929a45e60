# frozen_string_literal: true

require "oribi/tune/resources"

module Oribi
  # A command run in a process group of its own, its output in one log
  # file: how tune, the bench suite and the tests start a server. Its
  # processes are read from /proc: its tree (by parent, which finds
  # Pitchfork's workers, children of a mold in a session of their own) and
  # its group. stop leaves none of them behind. When it is ready is the
  # caller's to say: each starts a different server and asks it its own way.
  class ProcessGroup
    POLL = 0.02 # seconds between two waitpid WNOHANG while waiting for an exit

    # status: the leader's exit status, once reaped here
    attr_reader :pid, :log_path, :status

    # log: the file for stdout and stderr, opened once (two opens would
    # overwrite each other's lines), or nil when spawn gives out: and err:.
    # spawn: more Process.spawn options (rlimit_nofile:, ...); stdin is
    # /dev/null unless it says otherwise.
    def initialize(argv, log:, env: {}, chdir: nil, **spawn)
      @log_path = log
      options = { in: File::NULL, pgroup: true }
      options[%i[out err]] = log if log
      options[:chdir] = chdir if chdir
      @pid = Process.spawn(env, *argv, **options, **spawn)
      @reaped = false
    end

    # Whether the leader has ended; reaps it, without blocking.
    def exited? = collect(Process::WNOHANG)

    # The leader's exit status once it ends by itself, or nil while it
    # still runs after timeout seconds (not signalled then) or when another
    # waiter reaped it. Polls waitpid: no Timeout thread interrupting a wait.
    def reap(timeout:)
      deadline = now + timeout
      sleep POLL until exited? || now > deadline
      @status
    end

    # signal to the leader (to the whole group with group: true), up to
    # timeout seconds for it to end, then KILL to the group and to the
    # processes of the tree that left it (the same processes: same start
    # time, not a pid reused since): workers that outlive their master, or
    # all of it when it did not stop. Reaped; idempotent. → its status.
    def stop(signal = :TERM, timeout: 10, group: false)
      return @status if @stopped

      @stopped = true
      tree = members.transform_values { |f| f[19] }
      kill(signal, group ? -@pid : @pid) unless exited?
      reap(timeout: timeout)
      kill(:KILL, -@pid) if own_group?
      tree.each { |pid, started| kill(:KILL, pid) if start_time(pid) == started }
      collect(0) # KILLed: it ends
      @status
    end

    # Live children of the leader: a master's workers.
    def worker_pids = @reaped ? [] : Tune::Resources.children(@pid)

    # { pid => [cpu seconds, rss bytes] } for all its processes. CPU counts
    # the children each process has reaped, so a worker that exited
    # between two readings still counts, once, in its parent's.
    def stats
      members.transform_values do |f|
        [f[11, 4].sum(&:to_i) / Tune::Resources::TICK, f[21].to_i * 4096] # u, s, cu, cs time; rss
      end
    end

    # { pid => stat fields } of the processes under the leader (by parent)
    # and in its group. Once reaped its pid may be another process's.
    def members
      procs = Tune::Resources.proc_stats
      kids = procs.group_by { |_, f| f[1].to_i }.transform_values { |l| l.map(&:first) }
      group = own_group?
      found = procs.filter_map { |pid, f| pid if (pid == @pid && !@reaped) || (group && f[2].to_i == @pid) }
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

    def log = @log_path && File.exist?(@log_path) ? File.read(@log_path) : ""
    def tail(n = 5) = log.lines.last(n)

    private

    # Whether the group numbered after the leader may still be its own: a
    # group's id is its leader's pid, which stays taken while the leader is
    # unreaped or any process of the group lives; once no process has that
    # pid, what is left of the group (if anything) is the leader's. A
    # process with the pid after the reap means the group emptied and the
    # number went to another process, maybe another group's leader.
    def own_group? = !@reaped || !File.exist?("/proc/#{@pid}")

    # waitpid with flags; true once the leader is reaped (by whoever).
    def collect(flags)
      return true if @reaped

      _, @status = Process.waitpid2(@pid, flags)
      @reaped = !@status.nil?
    rescue Errno::ECHILD
      @reaped = true
    end

    def kill(signal, target)
      Process.kill(signal, target)
    rescue Errno::ESRCH, Errno::EPERM
      nil
    end

    def start_time(pid)
      Tune::Resources.stat_fields(File.read("/proc/#{pid}/stat"))[19]
    rescue SystemCallError
      nil
    end

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end
