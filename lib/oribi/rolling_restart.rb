# frozen_string_literal: true

module Oribi
  # A rolling restart (HUP, `POST /restart`, a refork's new generation):
  # the workers replaced one at a time, the new one booted before its old
  # one stops, rolling_interval seconds apart, so that the listeners are
  # never left without a worker serving. The master starts it with the
  # pids to replace and steps it every loop turn, giving it its own spawn
  # and retire.
  class RollingRestart
    def initialize(interval)
      @interval = interval
      @pids = [] # still to replace, in order
      @new = nil # the pid of the replacement booting now
      @next_at = nil
    end

    def start(pids, now)
      @pids = pids
      @new = nil
      @next_at = now
    end

    def any? = @pids.any?
    def size = @pids.size

    # Stopped (a stop, a new restart of another kind): what is left stays.
    def clear
      @pids.clear
      @new = nil
    end

    # When the master must look again, nil: no need.
    def deadline = (@next_at if any?)

    # children: the master's, pid => Child; spawn: index -> the new Child;
    # retire: Child -> it drains.
    def step(children, now, spawn:, retire:)
      return if @pids.empty?

      if @new
        fresh = children[@new]
        return abort("the new worker died before it booted") unless fresh
        return unless fresh.booted

        old = children[@pids.shift]
        retire.call(old) if old
        @new = nil
        @next_at = now + @interval
        Log.info("rolling restart done") if @pids.empty?
      elsif now >= @next_at
        old = children[@pids.first]
        return @pids.shift if old.nil? || old.leaving? # its replacement is already there

        @new = spawn.call(old.index).pid
      end
    end

    private

    def abort(why)
      Log.error("rolling restart stopped: #{why}")
      clear
    end
  end
end
