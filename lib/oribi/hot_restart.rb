# frozen_string_literal: true

module Oribi
  # The master's side of a hot restart (USR2; Reexec carries its state
  # across exec(2)). Before the exec: the listeners, the workers that serve
  # and their lifeline handed over, and a stand-in answering the control
  # endpoint while the new code loads (StandIn). After it, in the new
  # image: the previous workers (adopted), serving until ours do, then
  # draining, killed past shutdown_timeout; kept serving when the new code
  # does not boot. The master asks it and tells it what happened; it holds
  # no worker of its own.
  class HotRestart
    # pid => index of the previous image's workers still running
    attr_reader :adopted
    # the write end of their lifeline, held until they are gone (nil: none)
    attr_reader :lifeline

    # signal: ->(pid, sig), the master's
    def initialize(config, signal)
      @config = config
      @signal = signal
      @adopting = Reexec.adopting?
      @adopted = Reexec.adopted
      @lifeline = Reexec.lifeline
      @stand_in = Reexec.stand_in
      @draining = false
      @deadline = nil
      @pending = false
    end

    # The previous workers drain (or there were none left to drain).
    def draining? = @draining

    # How many of the previous workers serve.
    def serving = @draining ? 0 : @adopted.size

    # When the loop must look again (a monotonic time), nil: no need.
    def deadline = (@deadline if @adopted.any?)

    # The new image's loop answers the control endpoint from now.
    def loop_started = StandIn.stop(@stand_in)

    # A USR2 that waits for a better moment.
    def defer(why)
      @pending = true
      Log.info("USR2: #{why}")
    end

    # A deferred USR2 whose moment came (ready: the workers all serve).
    def due?(ready)
      return false unless @pending && ready && @adopted.empty?

      @pending = false
      true
    end

    # The new workers serve: those of the old code drain, leaving the
    # backlog to them.
    def retire(now)
      return unless @adopting && !@draining

      @draining = true
      return Log.info("USR2 done") if @adopted.empty?

      Log.info("USR2: the new workers serve; draining the #{@adopted.size} previous one(s)")
      @deadline = now + @config[:shutdown_timeout]
      @adopted.each_key { |pid| @signal.call(pid, :USR2) }
    end

    # The server stops: the previous workers too, with sig (TERM drains
    # the backlog, USR2 leaves it to a next generation).
    def stop(sig)
      @adopted.each_key { |pid| @signal.call(pid, sig) } unless @draining
      @draining = true
    end

    # A reaped pid: true when it was a previous worker.
    def reaped(pid, status, describe)
      return false unless (index = @adopted.delete(pid))

      Log.error("previous worker[#{index}] pid #{pid} #{describe}") unless status.success? || @draining
      if @adopted.empty?
        @lifeline&.close
        @lifeline = nil
        Log.info("USR2 done: the previous workers are gone") if @draining
      end
      true
    end

    # Previous workers still draining shutdown_timeout after the new ones
    # took over (a stream that never ends) are killed, as at a stop.
    def enforce_deadline(now)
      return unless @deadline && @adopted.any? && now >= @deadline

      Log.error("shutdown_timeout (#{@config[:shutdown_timeout]} s): killing the previous worker(s) " \
                "#{@adopted.keys.join(', ')} still draining after USR2")
      @adopted.each_key { |pid| @signal.call(pid, :KILL) }
      @deadline = nil
    end

    # The new code's workers cannot boot: whether the previous ones go on
    # serving in their place (then said).
    def keep?(boot_failures)
      return false unless @adopted.any? && !@draining

      Log.error("USR2: the new code's workers died while booting #{boot_failures} times in a row; " \
                "the #{@adopted.size} previous worker(s) go on serving; USR2 tries again")
      true
    end

    # Just before the exec: a copy of the master that answers the control
    # endpoint while the new code loads (StandIn). workers: pid => index of
    # those that serve on; in_child runs first in the copy (what it must
    # not hold); answer: ->(method, path, alive) the master's answers from
    # the workers still alive. The copy's pid, nil without one.
    def fork_stand_in(control, workers, in_child:, answer:)
      return nil unless control && !control.closed?

      Process.fork do
        in_child.call
        StandIn.run(control, workers, answer)
      end
    rescue SystemCallError => e # no memory for a fork: probes wait in the backlog, as they would
      Log.error("USR2: no stand-in for the control endpoint while the new code loads", e)
      nil
    end

    # In place: this pid execs the command line again, from
    # working_directory as named, handing over the listeners and workers
    # (pid => index), which serve until the new image's workers do; a
    # stand-in (fork_stand_in) answers the control endpoint meanwhile. Returns only when the exec failed.
    def exec(server:, workers:, lifeline:, control:, solid_queue:, stand_in:)
      argv, dir = server.launch
      env, fds = Reexec.handover(listeners: server.listeners, workers: workers, lifeline: @lifeline || lifeline,
                                 control: control, solid_queue: solid_queue, stand_in: stand_in)
      env.merge!(Reexec.repointed(ENV.to_h, from: server.booted_in, to: dir), "PWD" => dir)
      argv = argv.map { |a| Reexec.repoint(a, from: server.booted_in, to: dir) }
      Log.info("USR2: re-executing in place from #{dir}, pid #{Process.pid}; " \
               "#{workers.size} worker(s) serve until the new ones do" \
               "#{"; pid #{stand_in} answers the control endpoint meanwhile" if stand_in}")
      Systemd.notify("RELOADING=1")
      yield # what the master does last
      $stdout.flush
      $stderr.flush
      Dir.chdir(dir)
      Kernel.exec(env, [argv[0], argv[0]], *argv[1..], fds) # never through a shell
    rescue SystemCallError => e
      StandIn.stop(stand_in)
      Log.error("USR2: exec failed; this image goes on serving", e)
    end

    # The control endpoint while a hot restart's new image loads. After the
    # master's exec(2) come Ruby's own start, the gems, the config and the
    # app (a preloaded Rails app: seconds) before the new image's loop can
    # answer; the previous workers serve all that time, and a load balancer
    # whose health check gives up sooner would take the host out for
    # nothing. So just before the exec the master forks a stand-in: a copy
    # of itself that keeps the endpoint's socket (the new image holds the
    # same one) and answers from what the master knew, with the scoreboard
    # the previous workers go on writing, until the new image's loop takes
    # over (HotRestart#loop_started; the clients it took are answered
    # first). The reports are answered; POST /restart and /stop get 409:
    # the new image cannot act on them before it runs. It stops by itself
    # once the master is gone, or the previous workers are (a new image
    # that does not know it: an older Oribi).
    module StandIn
      LOOK_EVERY = 0.2 # s: how often it looks for the master and the previous workers

      module_function

      # In the new image: the stand-in has nothing more to do.
      def stop(pid)
        Process.kill(:TERM, pid) if pid
      rescue Errno::ESRCH
        nil
      end

      def run(control, workers, answer)
        Process.setproctitle("oribi control stand-in for #{Process.ppid} (hot restart)")
        master = Process.ppid
        done = false
        trap(:TERM) { done = true }
        until done && control.idle?
          control.stop_accepting if done
          break if Process.ppid != master || workers.none? { |pid, _| Platform.alive?(pid) }

          reads, writes = control.wait_ios
          left = [control.next_deadline.to_f - Process.clock_gettime(Process::CLOCK_MONOTONIC), LOOK_EVERY].min
          IO.select(reads, writes, nil, left.clamp(0, LOOK_EVERY))
          control.serve { |method, path, _query| respond(workers, method, path, answer) }
        end
      rescue Exception => e # rubocop:disable Lint/RescueException -- said, then gone: the new image answers soon
        Log.error("control stand-in: stopped early", e)
      ensure
        exit!(0) # the app's at_exit handlers are the master's, not a stand-in's
      end

      # The master's answers, from the previous workers still alive.
      def respond(workers, method, path, answer)
        if Control::ROUTES[path] == "POST" && method == "POST"
          return [409, "text/plain", "a hot restart is under way: the new code is loading\n", { "retry-after" => "1" }]
        end

        answer.call(method, path, workers.select { |pid, _| Platform.alive?(pid) })
      end
    end
  end
end
