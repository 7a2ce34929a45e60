# frozen_string_literal: true

module Oribi
  # The control endpoint while a hot restart's new image loads. After the
  # master's exec(2) (USR2, Reexec) come Ruby's own start, the gems, the
  # config and the app (a preloaded Rails app: seconds) before the new
  # image's loop can answer; the previous workers serve all that time, and
  # a load balancer whose health check gives up sooner would take the host
  # out for nothing. So just before the exec the master forks a stand-in:
  # a copy of itself that keeps the endpoint's socket (the new image holds
  # the same one) and answers from what the master knew, with the
  # scoreboard the previous workers go on writing, until the new image's
  # loop takes over (Master#run stops it; the clients it took are answered
  # first). The reports are answered; POST /restart and /stop get 409: the
  # new image cannot act on them before it runs. It stops by itself once
  # the master is gone, or the previous workers are (a new image that does
  # not know it: an older Oribi).
  module ControlStandIn
    LOOK_EVERY = 0.2 # s: how often it looks for the master and the previous workers

    # In the new image: the stand-in has nothing more to do.
    def self.stop(pid)
      Process.kill(:TERM, pid) if pid
    rescue Errno::ESRCH
      nil
    end

    private

    # In the old image, just before the exec; workers: pid => index of
    # those that serve on. → the stand-in's pid, or nil without one.
    def fork_stand_in(workers)
      return nil unless @control && !@control.closed?

      fork do
        @signals.reset
        [@life_w, @old_lifeline, @ready_r, @ready_w].each { |io| io&.close unless io&.closed? }
        @children.each_value { |c| c.link&.close }
        run_stand_in(workers)
      end
    rescue SystemCallError => e # no memory for a fork: probes wait in the backlog, as they would
      Log.error("USR2: no stand-in for the control endpoint while the new code loads", e)
      nil
    end

    def run_stand_in(workers)
      Process.setproctitle("oribi control stand-in for #{Process.ppid} (hot restart)")
      master = Process.ppid
      done = false
      trap(:TERM) { done = true }
      until done && @control.idle?
        @control.stop_accepting if done
        break if Process.ppid != master || workers.none? { |pid, _| Platform.alive?(pid) }

        reads, writes = @control.wait_ios
        left = [@control.next_deadline.to_f - now, LOOK_EVERY].min
        IO.select(reads, writes, nil, left.clamp(0, LOOK_EVERY))
        @control.serve { |method, path, _query| stand_in_request(workers, method, path) }
      end
    rescue Exception => e # rubocop:disable Lint/RescueException -- said, then gone: the new image answers soon
      Log.error("control stand-in: stopped early", e)
    ensure
      exit!(0) # the app's at_exit handlers are the master's, not a stand-in's
    end

    # The master's answers, from the previous workers still alive.
    def stand_in_request(workers, method, path)
      if Control::ROUTES[path] == "POST" && method == "POST"
        return [409, "text/plain", "a hot restart is under way: the new code is loading\n", { "retry-after" => "1" }]
      end

      alive = workers.select { |pid, _| Platform.alive?(pid) }
      @children.select! { |pid, _| alive.key?(pid) }
      @adopted.select! { |pid, _| alive.key?(pid) }
      return [200, "application/json", Stats.json(stats.merge(reloading: true))] if path == "/stats" && method == "GET"

      control_request(method, path)
    end
  end
end
