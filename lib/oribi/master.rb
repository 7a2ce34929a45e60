# frozen_string_literal: true

module Oribi
  # The prefork master: forks the workers, notices at once when one dies
  # and replaces it (throttled when they keep crashing), and acts on the
  # operator's signals (SIGNALS.md). It never serves a request itself.
  class Master
    SIGNALS = %w[TERM INT QUIT TTIN TTOU USR1 HUP CHLD].freeze
    BOOT_FAILURES_MAX = 3 # workers in a row that die before booting: give up
    QUICK_CRASH = 5.0     # a worker that dies sooner than this after boot crashed "quickly"
    KILL_WAIT = 5.0       # after SIGKILL, how long to wait for the last reaps

    Slot = Struct.new(:index, :pid, :started, :booted, :retiring, keyword_init: true)

    def initialize(server, app)
      @server = server
      @config = server.config
      @app = app
      @count = @config[:workers]
      @slots = {}          # pid => Slot
      @boot_failures = 0
      @quick_crashes = 0
      @respawn_at = 0.0
      @stopping = false
      @deadline = nil
    end

    # Returns the exit status: 0 after a graceful stop.
    def run
      @signals = Signals.new(SIGNALS)
      @ready_r, @ready_w = IO.pipe
      @ready_r.close_on_exec = true
      @status = 0
      @watchdog_interval = Systemd.watchdog_interval
      @next_watchdog = now
      Process.setproctitle("oribi master #{@server.listeners.all.map(&:uri).join(' ')}")
      loop do
        spawn_missing unless @stopping
        @signals.wait(wait_time, [@ready_r]).each { |sig| handle(sig) }
        read_ready
        reap
        enforce_deadline
        supervise
        break if @stopping && @slots.empty?
      end
      @status
    end

    private

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

    # Tells systemd (when it listens) that the service is up once every
    # worker booted, and keeps its watchdog fed.
    def supervise
      if !@notified_ready && !@stopping && @slots.size == @count && @slots.values.all?(&:booted)
        @notified_ready = true
        Systemd.notify("READY=1\nMAINPID=#{Process.pid}\nSTATUS=#{@count} workers")
      end
      return unless (interval = @watchdog_interval)

      return unless now >= @next_watchdog

      Systemd.notify("WATCHDOG=1")
      @next_watchdog = now + interval
    end

    def wait_time
      times = [@deadline, (@respawn_at if @respawn_at > now), (@next_watchdog if @watchdog_interval)].compact
      times.empty? ? nil : [times.min - now, 0].max
    end

    def handle(sig)
      case sig
      when "TERM", "INT", "QUIT" then @stopping ? signal_all(:KILL) : shutdown(sig)
      when "TTIN"
        @count += 1
        Log.info("TTIN: #{@count} workers")
      when "TTOU"
        retire_one if @count > 1
      when "USR1"
        Log.reopen(@config)
        signal_all(:USR1)
      when "HUP"
        Log.info("HUP ignored: rolling restarts are not available yet")
      end
    end

    def shutdown(sig)
      Log.info("#{sig}: draining #{@slots.size} worker(s), #{@config[:shutdown_timeout]} s at most")
      @stopping = true
      @deadline = now + @config[:shutdown_timeout]
      Systemd.notify("STOPPING=1")
      signal_all(:TERM)
      # The workers keep their copies until their backlog is served; once
      # the last is closed new connections are refused.
      @server.listeners.close
    end

    def retire_one
      slot = @slots.values.reject(&:retiring).max_by(&:index) or return
      @count -= 1
      slot.retiring = true
      Log.info("TTOU: #{@count} workers (stopping worker[#{slot.index}])")
      signal(slot.pid, :TERM)
    end

    def spawn_missing
      return if now < @respawn_at

      live = @slots.values.reject(&:retiring).map(&:index)
      (0...@count).each do |index|
        next if live.include?(index)

        spawn(index)
        return if now < @respawn_at
      end
    end

    def spawn(index)
      @config.hook(:before_fork, @server, index)
      pid = fork do
        @signals.reset
        @ready_r.close
        Process.setproctitle("oribi worker[#{index}] booting")
        @config.hook(:after_fork, @server, index)
        app = @app || @server.load_app
        Worker.new(@server, app, index: index, ready: @ready_w).run
        $stdout.flush # exit! skips at_exit and buffered output
        $stderr.flush
        exit!(0)
      rescue Exception => e # rubocop:disable Lint/RescueException
        Log.error("worker[#{index}] failed", e) unless e.is_a?(SystemExit)
        exit!(1)
      end
      @slots[pid] = Slot.new(index: index, pid: pid, started: now, booted: false)
    end

    def read_ready
      loop do
        data = @ready_r.read_nonblock(4096, exception: false)
        break if data == :wait_readable || data.nil?

        data.each_line do |line|
          _, pid = line.split.map(&:to_i)
          next unless (slot = @slots[pid])

          slot.booted = now
          @boot_failures = 0
        end
      end
    end

    def reap
      loop do
        pid, status = Process.wait2(-1, Process::WNOHANG)
        break unless pid

        slot = @slots.delete(pid) or next
        read_ready # a worker may have booted and died between two looks
        died(slot, status)
      end
    rescue Errno::ECHILD
      nil
    end

    def died(slot, status)
      return if @stopping || slot.retiring

      clean = status.success?
      Log.error("worker[#{slot.index}] pid #{slot.pid} #{describe(status)}") unless clean
      if !slot.booted
        @boot_failures += 1
        if @boot_failures >= BOOT_FAILURES_MAX
          Log.error("workers died while booting #{@boot_failures} times in a row; stopping " \
                    "(see the errors above)")
          @status = 1
          shutdown("boot failure")
          return
        end
        throttle
      elsif !clean && now - slot.booted < QUICK_CRASH
        throttle
      else
        @quick_crashes = 0 # a recycled (max_requests) or long-lived worker
      end
    end

    # Crash loops back off: 0.5 s, 1 s, 2 s ... up to 10 s between spawns.
    def throttle
      @quick_crashes += 1
      @respawn_at = now + [0.5 * (2**(@quick_crashes - 1)), 10].min
    end

    def describe(status)
      status.signaled? ? "killed by SIG#{Signal.signame(status.termsig)}" : "exited with status #{status.exitstatus}"
    end

    def enforce_deadline
      return unless @deadline && now >= @deadline && !@slots.empty?

      Log.error("shutdown_timeout: killing #{@slots.values.map { |s| "worker[#{s.index}]" }.join(', ')}")
      signal_all(:KILL)
      @deadline = now + KILL_WAIT
    end

    def signal_all(sig)
      @slots.each_key { |pid| signal(pid, sig) }
    end

    def signal(pid, sig)
      Process.kill(sig, pid)
    rescue Errno::ESRCH
      nil
    end
  end
end
