# frozen_string_literal: true

module Oribi
  # The prefork master: forks the workers, notices at once when one dies
  # and replaces it (throttled when they keep crashing), kills one stuck in
  # a request past request_timeout or hung past worker_timeout, and acts on
  # the operator's signals
  # (docs/SIGNALS.md): graceful stop, more or fewer workers, log reopening,
  # rolling restart (HUP) and hot restart of the whole server (USR2). It
  # never serves a request itself; it answers the control endpoint when
  # there is one (docs/CONTROL.md).
  class Master
    SIGNALS = Signals.master_names.freeze
    KILL_WAIT = 5.0       # after SIGKILL, how long to wait for the last reaps
    SHUTDOWN_TIMED_OUT = 3 # exit status when shutdown_timeout had to kill workers

    # signals: a Signals for SIGNALS, set up before the listeners were bound
    def initialize(server, app, signals)
      @signals = signals
      @server = server
      @config = server.config
      @app = app
      @count = @config[:workers]
      @refork = Refork.new(@config)
      @workers = Workers.new(server, app, refork: @refork, in_child: method(:in_worker))
      @memory = WorkerMemory.new(@config)
      @stopping = false
      @deadline = nil
      @delay = ShutdownDelay.new(@config[:shutdown_delay])
      @rolling = RollingRestart.new(@config[:rolling_interval])
      # USR2: the previous image's workers, serving until ours do
      @hot = HotRestart.new(@config, @workers.method(:signal))
      @degraded = server.degraded # the new code did not load: only the adopted workers serve
      @count = 0 if @degraded
      @started_at = Time.now
      @solid_queue_previous = Reexec.solid_queue # USR2: the previous image's, stopped once ours runs
    end

    # Returns the exit status: 0 after a graceful stop.
    def run
      @server.write_pid_file
      # Only the master holds the write end: when it dies, however it dies,
      # every worker (and mold) reads EOF and stops (Worker#watch_master).
      @life_r, @life_w = IO.pipe
      @solid_queue = solid_queue_process if @config[:solid_queue]
      @timeouts = Timeouts.new(@config, @workers.scoreboard)
      @status = 0
      @watchdog_interval = Systemd.watchdog_interval
      @next_watchdog = now # the loop's first look pings (Server#run stopped the feeding thread just before)
      Process.setproctitle("oribi master #{@server.listeners.all.map(&:uri).join(' ')}")
      @control = @server.control
      Oribi.child_subreaper! if @refork.on?
      @restart_file = RestartFile.new(@config[:restart_file])
      @certificates = Certificates.new(@server.listeners)
      @memory.announce(@count)
      @hot.loop_started # this loop answers the control endpoint from here
      loop do
        @workers.spawn_missing(@count, now) unless @stopping
        reads, writes = @control ? @control.wait_ios : [[], []]
        reads << @refork.promotion_link(@workers)
        @signals.wait(wait_time, [@workers.ready, *reads].compact, writes).each { |sig| handle(sig) }
        serve_control
        @workers.read_ready(now)
        reap
        roll
        refork_step if @refork.on? && !stopping? && @hot.adopted.empty?
        enforce_timeouts
        enforce_idle_timeout
        @memory.enforce(@workers, @count, now) unless stopping?
        end_delay
        enforce_deadline
        @hot.enforce_deadline(now)
        supervise
        supervise_solid_queue
        watch_restart_file
        rolling_restart("TLS") if !stopping? && @certificates.changed?(now)
        break if @stopping && @workers.empty? && @hot.adopted.empty? && !@solid_queue&.running?
        break no_workers_left if @degraded && @hot.adopted.empty?
      end
      @status
    end


    # What the control endpoint reads and asks (Control.route).
    def stats
      Stats.snapshot(children: @workers.values, scoreboard: @workers.scoreboard, retired: @workers.retired, started_at: @started_at,
                     configured: @count, state: readiness, listening: @server.listeners)
    end

    # "ready", or why not: "stopping" once draining, "booting" until the
    # configured number of workers serve (during a USR2, old or new).
    def readiness
      return "stopping" if stopping?
      serving = @workers.values.count { |s| s.booted && (!s.retiring || s.pid == @refork.promoting) }
      serving += @hot.serving # USR2: the previous workers serve meanwhile
      return "booting" if serving < @count

      "ready"
    end

    def control_restart
      return [409, "text/plain", "stopping\n"] if stopping?
      return [409, "text/plain", "a rolling restart is under way\n"] if @rolling.any?

      @control_action = :restart
      [202, "text/plain", "rolling restart of #{@workers.size} worker(s)\n"]
    end

    def control_stop
      @control_action = :stop
      [202, "text/plain", "stopping\n"]
    end

    private

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

    def wait_time
      times = [@deadline, (@delay.ends_at unless @stopping), @workers.respawn_at(now), (@next_watchdog if @watchdog_interval),
               @rolling.deadline, @hot.deadline,
               (now + 1 if @timeouts.any? || @restart_file.on?),
               @memory.deadline(@count, now), @certificates.deadline(now),
               @control&.next_deadline, @solid_queue&.deadline].compact
      times.empty? ? nil : [times.min - now, 0].max
    end

    # Each signal logs one line saying what it does (the actions below log
    # their own), in the config's language (Signals::PUMA).
    def handle(sig)
      puma = @config.puma?
      action = (puma ? Signals::PUMA : Signals::MASTER)[sig] or return
      name = puma && Signals::PUMA[sig] != Signals::MASTER[sig] ? "#{sig} (Puma's)" : sig
      case action
      when :stop then stopping? ? stop_now(name) : graceful_stop(name)
      when :more
        @count += 1
        Log.info("#{name}: #{@count} workers")
      when :fewer then retire_one(name)
      when :reopen_logs then reopen_logs(name)
      when :reopen_logs_or_stop
        @config[:stdout_path] || @config[:stderr_path] ? reopen_logs(name) : graceful_stop("#{name}, no stdout_redirect: as INT")
      when :roll then rolling_restart(name)
      when :reexec then hot_restart
      when :backtraces
        Log.info("#{name}: Oribi prints no thread backtraces; soft_timeout logs a slow request's (docs/SIGNALS.md)")
      end
    end

    # Said in the new files, where whoever rotated them looks next.
    def reopen_logs(name)
      Log.reopen(@config)
      Log.info("#{name}: reopened the log files, the master's and the workers'")
      @workers.signal_all(:USR1)
    end

    # drain_backlog: false when a next generation shares the listeners
    # (USR2, or start_server/systemd holding them): queued connections are
    # its to serve.
    def shutdown(why, drain_backlog: @server.listeners.supervisor.nil?)
      return if @stopping

      @deadline ||= now + @config[:shutdown_timeout] # from TERM, a shutdown_delay included
      Log.info("#{why}: draining #{@workers.size} worker(s), #{(@deadline - now).round(1)} s at most")
      @stopping = true
      @rolling.clear
      Systemd.notify("STOPPING=1")
      # start_server stops a generation once the next one serves, the
      # control endpoint included: probes go to that one from now on.
      close_control if @server.listeners.supervisor == :start_server
      @workers.signal_all(drain_backlog ? :TERM : :USR2)
      @hot.stop(drain_backlog ? :TERM : :USR2)
      # The workers keep their copies until they find the backlog empty;
      # once the last is closed new connections are refused (or go to the
      # heir). A unix socket file stays until the master exits: a proxy
      # that connects while the workers drain is still served.
      @server.listeners.close_sockets
    end

    # TERM, INT, QUIT or `POST /stop`: shutdown_delay first when there is
    # one (ShutdownDelay), then the drain (#shutdown).
    def graceful_stop(why)
      case @delay.stop(why, now)
      when :drain then shutdown(why)
      when :wait
        Log.info("#{why}: readiness 503, serving #{@delay.seconds} s more (shutdown_delay), then draining")
        @deadline = now + @config[:shutdown_timeout]
        @rolling.clear
        Systemd.notify("STOPPING=1")
      end
    end

    # Called from the loop: the drain, once the delay is over.
    def end_delay
      shutdown(@delay.why) if !@stopping && @delay.over?(now)
    end

    # Stopping, or about to: no restarts, readiness 503.
    def stopping? = @stopping || @delay.begun?

    # A second TERM: in-flight requests are lost.
    def stop_now(sig)
      Log.info("#{sig} again: killing the workers, whatever they have in flight")
      shutdown(sig) unless @stopping # during shutdown_delay
      @workers.signal_all(:KILL)
      @solid_queue&.kill
    end

    def retire_one(name)
      return Log.info("#{name} ignored: one worker is the fewest") if @count <= 1

      child = @workers.values.reject(&:leaving?).max_by(&:index) or return
      @count -= 1
      Log.info("#{name}: #{@count} workers (stopping worker[#{child.index}])")
      @workers.retire(child)
    end

    # First in each forked worker: the master's signal handlers undone and
    # what the master keeps to itself closed (Workers#spawn).
    def in_worker
      @signals.reset
      @life_w.close
      @hot.lifeline&.close
      Worker.lifeline = @life_r
      @control&.close_in_child
    end

    # Every child that ended: a previous image's worker, Solid Queue's
    # supervisor, or one of ours.
    def reap
      loop do
        pid, status = Process.wait2(-1, Process::WNOHANG)
        break unless pid
        next if @hot.reaped(pid, status, Workers.describe(status))
        next if @solid_queue&.reaped(pid, status, now)

        child = @workers.reaped(pid, now) or next
        died(child, status) unless @stopping || child.retiring
      end
    rescue Errno::ECHILD
      nil
    end

    # One that should serve died: replaced (Workers#died) unless too many
    # died booting in a row; then the previous image's workers go on
    # serving (a USR2 whose new code fails), or the master stops.
    def died(child, status)
      return unless @workers.died(child, status, now) == :boot_failures
      return keep_adopted if @hot.keep?(@workers.boot_failures)

      Log.error("workers died while booting #{@workers.boot_failures} times in a row; stopping (see the errors above)")
      @status = 1
      shutdown("boot failure")
    end

    # ---- rolling restart (HUP): one worker at a time, a new one booted
    # before the old one stops, rolling_interval seconds apart ----

    def rolling_restart(name = "HUP")
      return Log.info("#{name} ignored: stopping") if stopping?
      return Log.info("#{name} ignored: a rolling restart is under way") if @rolling.any?
      return hot_restart if release_changed_under_preload?(name)

      @certificates.reload(name) if name != "TLS" && @certificates.any? # read when changed
      @refork.drop # new workers come from the master again (and load the app anew when not preloaded)
      @solid_queue&.restart unless @app

      @rolling.start(@workers.values.reject(&:leaving?).sort_by(&:index).map(&:pid), now)
      Log.info("#{name}: rolling restart of #{@rolling.size} worker(s)#{', reloading the app' unless @app}")
    end

    # working_directory as named, resolved again: workers that load the
    # app (preload_app off) load it from the release `current` names now.
    # A preloaded app (the master holds its code) has a new release only
    # through a hot restart: HUP does USR2's work then, as Puma's phased
    # restart falls back to a full one (what a team migrating from Puma,
    # or a Capistrano task that sends HUP, expects). True when it does.
    def release_changed_under_preload?(name)
      dir = @server.launch.last
      Dir.chdir(dir)
      return false unless @app && Dir.pwd != @server.booted_in

      Log.info("#{name}: #{dir} is #{Dir.pwd} now, and the app was preloaded from #{@server.booted_in}: " \
               "a hot restart (USR2) loads the new release")
      true
    rescue SystemCallError => e
      Log.error("#{name}: cannot enter #{dir}; the workers start from #{Dir.pwd}", e)
      false
    end

    def roll
      @rolling.step(@workers, now, spawn: ->(index) { @workers.spawn(index, now) }, retire: @workers.method(:retire)) unless @stopping
    end

    def refork_step = @refork.step(@workers, @rolling, @workers.scoreboard, now, signal: @workers.method(:signal))

    # ---- hot restart (USR2): a new master from the same command line,
    # handed the listening sockets; the old one drains once the new one's
    # workers all serve, and keeps serving if the new one fails ----

    # restart_file: with the app's new code, a hot restart when the master
    # holds the app (preload_app), else a rolling restart, whose workers load it.
    def watch_restart_file
      return if stopping? || !@restart_file.touched?

      Log.info("#{@restart_file.path} changed: #{@app ? 'hot restart' : 'rolling restart'}")
      @app ? hot_restart : rolling_restart
    end

    # In place (Reexec): this pid execs the command line again, from
    # working_directory as named, handing over the listeners and the
    # workers, which serve until the new image's workers do.
    def hot_restart
      return Log.info("USR2 ignored: stopping") if stopping?
      return @hot.defer("once the previous workers have drained") if @hot.draining? && @hot.adopted.any?
      # Workers still booting: once they serve, unless they keep failing
      # (then they go: they served nothing, and this USR2 is the fix).
      return @hot.defer("once the workers have booted") if !@workers.crashing? && @workers.booting?

      @workers.values.each { |c| Process.kill(:KILL, c.pid) unless c.booted }
      workers = @hot.adopted.merge(@workers.booted.reject(&:leaving?).to_h { |c| [c.pid, c.index] })
      stand_in = @hot.fork_stand_in(@control, workers, in_child: method(:in_stand_in), answer: method(:stand_in_answer))
      @refork.drop
      @hot.exec(server: @server, workers: workers, lifeline: @life_w, control: @control,
                solid_queue: @solid_queue&.handover, stand_in: stand_in) do
        Systemd.notify("WATCHDOG=1") if @watchdog_interval # the new image's first comes once Ruby has started
      end
    end

    # In the stand-in, first: what it must not hold of the master's.
    def in_stand_in
      @signals.reset
      [@life_w, @hot.lifeline].each { |io| io&.close unless io&.closed? }
      @workers.close_in_child
    end

    # The stand-in's answers: the master's, with the workers still alive.
    def stand_in_answer(method, path, alive)
      @workers.keep(alive.keys)
      @hot.adopted.select! { |pid, _| alive.key?(pid) }
      return [200, "application/json", Stats.json(stats.merge(reloading: true))] if path == "/stats" && method == "GET"

      control_request(method, path)
    end

    # The new code's workers cannot boot: the old ones go on serving.
    def keep_adopted
      @degraded = true
      @count = 0
      @workers.values.each { |c| @workers.retire(c) }
    end

    def no_workers_left
      Log.error("the previous workers are all gone and the new code does not boot; exiting")
      @status = 1
    end

    # ---- health ----

    # Tells systemd (when it listens) and a parent generation (USR2) that
    # the service is up once every worker booted; feeds systemd's watchdog.
    def supervise
      if !@notified_ready && !@stopping && @workers.size >= @count && @workers.values.all?(&:booted)
        @notified_ready = true
        Systemd.notify("READY=1\nMAINPID=#{Process.pid}\nSTATUS=#{@count} workers")
        @server.listeners.take_ownership!
        @control&.take_ownership!
        @hot.retire(now) unless @degraded
      end
      hot_restart if @hot.due?(@notified_ready && @workers.values.all?(&:booted))
      return unless (interval = @watchdog_interval) && now >= @next_watchdog

      Systemd.notify("WATCHDOG=1")
      @next_watchdog = now + interval
    end

    # solid_queue: Solid Queue's supervisor runs once the workers serve (as
    # Puma's plugin starts it once booted), and stops after them.
    def solid_queue_process
      SolidQueueProcess.new(@server, @app, lifeline: @life_r, previous: @solid_queue_previous, in_child: lambda {
        @signals.reset
        @life_w.close
        @control&.close_in_child
        @workers.close_in_child
      })
    end

    def supervise_solid_queue
      if @solid_queue_previous && !@solid_queue && @notified_ready
        Log.info("solid_queue: off in the new config; stopping the previous image's supervisor")
        @workers.signal(@solid_queue_previous, :TERM)
        @solid_queue_previous = nil
      end
      return unless @solid_queue&.supervise(now, serving: @notified_ready && !@degraded, stopping: @stopping,
                                             workers_gone: @workers.empty? && @hot.adopted.empty?,
                                             past_deadline: @deadline && now >= @deadline)

      @status = SHUTDOWN_TIMED_OUT # killed past shutdown_timeout
      @deadline = now + KILL_WAIT
    end

    # Past request_timeout, worker_timeout or worker_boot_timeout (Timeouts).
    def enforce_timeouts
      @timeouts.overdue(@workers.values, now).each do |child, why|
        Log.error("worker[#{child.index}] pid #{child.pid} #{why}: killing it")
        @workers.scoreboard.unbusy(child.row) # its counters stay, for the totals
        child.killed = true
        @workers.signal(child.pid, :KILL)
      end
    end

    def enforce_idle_timeout
      return unless @notified_ready && !stopping?

      why = @timeouts.idle(@workers.values, @started_at) and graceful_stop(why)
    end

    # ---- control endpoint and stats (docs/CONTROL.md) ----

    def close_control
      @control&.close
      @control = nil
    end

    def serve_control
      return unless @control

      @control.serve { |method, path, _query| control_request(method, path) }
      action, @control_action = @control_action, nil
      case action
      when :restart then rolling_restart
      when :stop then graceful_stop("control: stop")
      end
    end

    def control_request(method, path) = Control.route(method, path, self)

    def enforce_deadline
      return unless @deadline && now >= @deadline && !@workers.empty?

      Log.error("shutdown_timeout (#{@config[:shutdown_timeout]} s): killing " \
                "#{@workers.values.map { |s| "worker[#{s.index}]" }.join(', ')} with requests still in flight; " \
                "exiting with status #{SHUTDOWN_TIMED_OUT}")
      @status = SHUTDOWN_TIMED_OUT # not a clean stop: requests were lost
      @workers.signal_all(:KILL)
      @deadline = now + KILL_WAIT
    end
  end
end
