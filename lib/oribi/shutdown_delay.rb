# frozen_string_literal: true

module Oribi
  # Lame-duck shutdown (shutdown_delay), the master's part: on TERM a
  # Kubernetes pod is taken out of its Service's endpoints while it is
  # already being stopped, and for a few seconds new connections still
  # arrive. With a delay, TERM turns readiness (/readyz) to 503 at once and
  # the workers go on accepting and serving for that long; then the drain
  # goes on as without one (Master#shutdown). shutdown_timeout counts from
  # TERM, the delay included. A second TERM stops at once, as always.
  module ShutdownDelay
    private

    # TERM, INT, QUIT or `POST /stop`: the delay first when there is one.
    def graceful_stop(why)
      delay = @config[:shutdown_delay]
      return shutdown(why) unless delay.positive?
      return if @lame_duck

      Log.info("#{why}: readiness 503, serving #{delay} s more (shutdown_delay), then draining")
      @lame_duck = [now + delay, why]
      @deadline = now + @config[:shutdown_timeout]
      @rolling.clear
      Systemd.notify("STOPPING=1")
    end

    # Called from the master's loop: the drain, once the delay is over.
    def end_lame_duck
      return unless @lame_duck && !@stopping && now >= @lame_duck.first

      shutdown(@lame_duck.last)
    end

    # Stopping, or about to: no restarts, readiness 503.
    def stopping? = @stopping || !@lame_duck.nil?
  end
end
