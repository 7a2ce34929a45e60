# frozen_string_literal: true

module Oribi
  # The master's table of its workers: a record of each (pid => Child), the
  # scoreboard rows they write, the pipe they say "booted" on, and the rules
  # for one that dies: replaced at once, throttled when they keep crashing,
  # given up on when they die before booting BOOT_FAILURES_MAX times in a
  # row. The master decides how many there should be and when one goes;
  # this table forks, counts and signals them. RollingRestart, Refork,
  # Timeouts and Stats read it as a table (#[], #values).
  class Workers
    BOOT_FAILURES_MAX = 3 # workers in a row that die before booting: give up
    QUICK_CRASH = 5.0     # a worker that dies sooner than this after boot crashed "quickly"
    ROWS = 1024           # scoreboard rows: workers alive at once, draining ones included

    # link: with refork, a socket to the worker (and to the mold it may become)
    # pending: signals held back until the worker has booted (#signal)
    # recycling: over max_worker_memory or at max_requests, draining; its
    # replacement is started at once, as for a rolling restart, so that a
    # drain held up by a slow client never leaves the listeners unserved
    # killed: by a timeout (Master#enforce_timeouts), once
    Child = Struct.new(:index, :pid, :started, :booted, :retiring, :row, :link, :generation, :mold, :pending,
                       :recycling, :killed, keyword_init: true) do
      # Draining, on its way out: its index is another worker's to fill.
      def leaving? = retiring || recycling
    end

    def self.describe(status)
      status.signaled? ? "killed by SIG#{Signal.signame(status.termsig)}" : "exited with status #{status.exitstatus}"
    end

    # The read end of the pipe workers write "PID booted" to: the master's
    # loop waits on it.
    attr_reader :ready
    attr_reader :scoreboard
    # What workers that are gone served, so that totals never go down.
    attr_reader :retired

    # in_child: run first in each forked worker, before anything else (the
    # master's signal handlers undone, what the master keeps to itself closed).
    def initialize(server, app, refork:, in_child:)
      @server = server
      @app = app
      @refork = refork
      @in_child = in_child
      @children = {}
      @boot_failures = 0
      @quick_crashes = 0
      @respawn_at = 0.0
      @ready, @ready_w = IO.pipe
      @ready.close_on_exec = true
      @scoreboard = Scoreboard.new(ROWS)
      @free_rows = (0...ROWS).to_a
      @retired = { served: 0, dropped_headers: 0, queue: Array.new(Scoreboard::QUEUE_BOUNDS.size + 1, 0), queue_sum: 0.0,
                   queue_from_header: 0, queue_header_refused: 0 }
    end

    # When a crash loop's back-off ends (#throttle), while it lasts.
    def respawn_at(now) = (@respawn_at if @respawn_at > now)

    def [](pid) = @children[pid]
    def values = @children.values
    def size = @children.size
    def empty? = @children.empty?

    # Every worker that has booted (a USR2 hands them over).
    def booted = @children.values.select(&:booted)

    # Workers still booting, not on their way out.
    def booting? = @children.each_value.any? { |c| !c.booted && !c.retiring }

    # Crashed lately (a hot restart does not wait for such workers to boot).
    def crashing? = @boot_failures.positive? || @quick_crashes.positive?

    # In a forked child that is not a worker: what it must not hold.
    def close_in_child
      [@ready, @ready_w].each { |io| io.close unless io.closed? }
      @children.each_value { |c| c.link&.close }
    end

    # Forks a worker for each of the count indexes that has none (a
    # draining one does not count), unless crashes hold spawns back.
    def spawn_missing(count, now)
      return if now < @respawn_at

      live = @children.values.reject(&:leaving?).map(&:index)
      promoting = @children[@refork.promoting] and live << promoting.index # to come from the mold
      (0...count).each do |index|
        next if live.include?(index)

        spawn(index, now)
        break if now < @respawn_at
      end
    end

    # The new Child: forked by the mold under refork, else here.
    def spawn(index, now)
      row = @free_rows.shift
      if (child = @refork.spawn(index, row, @scoreboard, now))
        return @children[child.pid] = child
      end

      @server.config.hook(:before_fork, @server, index)
      ours, theirs = UNIXSocket.pair if @refork.on?
      pid = fork do
        @in_child.call
        Worker.run_forked(@server, @app, index: index, ready: @ready_w, scoreboard: @scoreboard, row: row,
                                         link: theirs, generation: 1) do
          @ready.close
          ours&.close
          @children.each_value { |s| s.link&.close } # a mold must see EOF when the master closes its link
        end
      end
      theirs&.close
      @scoreboard.clear(row, pid)
      @children[pid] = Child.new(index: index, pid: pid, started: now, booted: false, row: row, link: ours, generation: 0)
    end

    # Reads what the workers said: booted (their held-back signals sent
    # now), or recycling at max_requests.
    def read_ready(now)
      loop do
        data = @ready.read_nonblock(4096, exception: false)
        break if data == :wait_readable || data.nil?

        data.each_line do |line|
          _, pid, what = line.split
          next unless (child = @children[pid = pid.to_i])
          next child.recycling = true if what == "recycling" # max_requests (Worker#retire)

          child.booted = now
          @boot_failures = 0
          child.pending&.uniq&.each { |sig| signal(pid, sig) }
          child.pending = nil
        end
      end
    end

    # The Child that pid was, now gone from the table with its row (its
    # counters kept in the totals), or nil when pid was no worker.
    def reaped(pid, now)
      child = @children.delete(pid) or return
      child.link&.close
      @refork.gone(child) if child.mold
      Stats.retire(@retired, @scoreboard.stats(child.row))
      @scoreboard.release(child.row) # what a worker that died counted in the head (its connections, a wait)
      @free_rows << child.row
      read_ready(now) # a worker may have booted and died between two looks
      child
    end

    # A worker died while it was meant to serve: logged, its replacement
    # throttled when they crash. :boot_failures when too many in a row died
    # before booting (the master gives up, or keeps a previous image's).
    def died(child, status, now)
      clean = status.success?
      Log.error("worker[#{child.index}] pid #{child.pid} #{Workers.describe(status)}") unless clean
      if !child.booted
        @boot_failures += 1
        return :boot_failures if @boot_failures >= BOOT_FAILURES_MAX

        throttle(now)
      elsif !clean && now - child.booted < QUICK_CRASH
        throttle(now)
      else
        @quick_crashes = 0 # a recycled (max_requests) or long-lived worker
      end
      nil
    end

    def boot_failures = @boot_failures

    # In a hot restart's stand-in: the table shrunk to the pids still alive.
    def keep(pids)
      @children.select! { |pid, _| pids.include?(pid) }
    end

    # Stops one worker while the others go on: the backlog is theirs.
    def retire(child)
      child.retiring = true
      signal(child.pid, :USR2)
    end

    # Drains without the backlog; #spawn_missing replaces it at once.
    def recycle(child)
      child.recycling = true
      signal(child.pid, :USR2)
    end

    def signal_all(sig)
      @children.each_key { |pid| signal(pid, sig) }
    end

    # A worker that has not booted yet may not have its own handlers: a TERM
    # could still run the master's (inherited across fork, it only notes the
    # signal for the master), or the default one, and lose the connections
    # queued for the worker. What is meant for it waits until it serves.
    # KILL never waits. Any other pid (a previous image's worker) at once.
    def signal(pid, sig)
      child = @children[pid]
      return (child.pending ||= []) << sig if child && !child.booted && sig != :KILL

      Process.kill(sig, pid)
    rescue Errno::ESRCH
      nil
    end

    private

    # Crash loops back off: 0.5 s, 1 s, 2 s ... up to 10 s between spawns.
    def throttle(now)
      @quick_crashes += 1
      @respawn_at = now + [0.5 * (2**(@quick_crashes - 1)), 10].min
    end
  end
end
