# frozen_string_literal: true

module Oribi
  # Solid Queue's supervisor (Rails 8's job backend) as a child of the
  # master, when solid_queue is on (or a Puma config says
  # `plugin :solid_queue`): the app's jobs run beside its workers, as under
  # Puma's plugin, with no second service to deploy. The master starts it
  # once the workers serve, forked from the preloaded app (or loading it),
  # starts it again when it dies (backing off when it keeps dying), stops
  # it after the workers on TERM, and on a hot restart (USR2) the new image
  # starts its own with the new code and then stops the old one
  # (Reexec.solid_queue). Solid Queue's supervisor forks and watches its
  # own workers and dispatcher; a TERM stops them gracefully.
  class SolidQueueProcess
    BACKOFF = [1, 2, 5, 10, 30].freeze # seconds before a restart, after each quick death in a row
    QUICK = 10.0                       # a supervisor that dies sooner than this after its start

    attr_reader :pid

    # server, app: the master's (app nil when not preloaded); lifeline: the
    # read end every child watches for the master's death; in_child: closes
    # in the child what the master must keep to itself (the lifeline's
    # write end first); previous: the pid an older image left running
    # (USR2), stopped once this one's supervisor runs.
    def initialize(server, app, lifeline:, in_child:, previous: nil)
      @server = server
      @app = app
      @lifeline = lifeline
      @in_child = in_child
      @previous = previous
      @pid = nil
      @start_at = nil # when to start (again); nil: not yet wanted
      @quick = 0
      @stopping = false
    end

    # From now on there should be one running: at once, or after a back-off.
    def want(now)
      @start_at ||= now
    end

    # Ours, or the previous one not yet reaped: the master waits for both.
    def running? = !(@pid || @previous).nil?

    def stopping? = @stopping

    # The next time the master must look (a start due), or nil.
    def deadline = (@start_at unless @pid || @stopping)

    # The master's loop, every turn: wanted once the workers serve, started
    # when due; stopped after the workers on a stop; killed once the stop
    # is past shutdown_timeout (true: the master's stop timed out).
    def supervise(now, serving:, stopping:, workers_gone:, past_deadline:)
      if !stopping
        want(now) if serving
        start_if_due(now)
      elsif workers_gone && !@stopping
        stop
      elsif past_deadline && running?
        Log.error("shutdown_timeout (#{@server.config[:shutdown_timeout]} s): killing the Solid Queue supervisor")
        kill
        return true
      end
      false
    end

    def start_if_due(now)
      return if @pid || @stopping || @start_at.nil? || now < @start_at

      @started = now
      @pid = fork { run_child }
      Log.info("solid_queue: supervisor started, pid #{@pid}")
      stop_previous
    end

    # true when pid was ours (or the previous image's) and is dealt with.
    def reaped(pid, status, now)
      if pid == @previous
        @previous = nil
        @previous_stopped = false
        return true
      end
      return false unless pid == @pid

      @pid = nil
      return true if @stopping

      quick = now - @started < QUICK
      @quick = quick ? @quick + 1 : 0
      delay = quick ? BACKOFF[[@quick - 1, BACKOFF.size - 1].min] : 0
      @start_at = now + delay
      Log.error("solid_queue: supervisor pid #{pid} #{describe(status)}; starting it again" \
                "#{" in #{delay} s" if delay.positive?}")
      true
    end

    # TERM: Solid Queue's graceful stop (its workers finish their jobs).
    def stop
      @stopping = true
      stop_previous(force: true)
      return unless @pid

      Log.info("solid_queue: stopping the supervisor, pid #{@pid}")
      Process.kill(:TERM, @pid)
    rescue Errno::ESRCH
      @pid = nil
    end

    # New code (HUP without preload_app): the supervisor is stopped and
    # started again, loading the app from working_directory anew.
    def restart
      return unless @pid

      Log.info("solid_queue: restarting the supervisor with the new code")
      @previous = @pid
      @previous_stopped = false
      @pid = nil
      @start_at = 0
    end

    # For the next image (USR2): the pid it stops once its own runs.
    def handover = [@pid, @previous].compact.first

    def kill
      [@pid, @previous].compact.each do |pid|
        Process.kill(:KILL, pid)
      rescue Errno::ESRCH
        nil
      end
    end

    private

    # Once ours runs (or at a stop, force): the one it replaces.
    def stop_previous(force: false)
      return unless @previous && (@pid || force) && !@previous_stopped

      Log.info("solid_queue: stopping the previous supervisor, pid #{@previous}")
      @previous_stopped = true
      Process.kill(:TERM, @previous)
    rescue Errno::ESRCH
      @previous = nil
    end

    def describe(status)
      status.signaled? ? "was killed by SIG#{Signal.signame(status.termsig)}" : "exited with status #{status.exitstatus}"
    end

    # In the child: the master's signal handling goes; the app is loaded
    # (when the master did not); Solid Queue's supervisor runs until a TERM,
    # or until the master is gone (its lifeline reads EOF).
    def run_child
      @in_child.call
      Process.setproctitle("oribi solid_queue")
      Log.worker = nil
      lifeline = @lifeline
      Thread.new do
        lifeline.read
        Process.kill(:TERM, Process.pid)
      end
      @app || @server.load_app
      ::SolidQueue::Supervisor.start
      exit!(0)
    rescue Exception => e # rubocop:disable Lint/RescueException -- any failure is the master's to hear of
      Log.error("solid_queue: the supervisor failed", e) unless e.is_a?(SystemExit) && e.success?
      exit!(e.is_a?(SystemExit) ? e.status : 1)
    end
  end
end
