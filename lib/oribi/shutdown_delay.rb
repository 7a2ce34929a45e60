# frozen_string_literal: true

module Oribi
  # Lame-duck shutdown (shutdown_delay): on TERM a Kubernetes pod is taken
  # out of its Service's endpoints while it is already being stopped, and
  # for a few seconds new connections still arrive. With a delay, TERM turns
  # readiness (/readyz) to 503 at once and the server goes on accepting and
  # serving for that long; then the drain goes on as without one.
  # shutdown_timeout counts from TERM, the delay included. A second TERM
  # stops at once, as always. The rule, for the master (Master#graceful_stop)
  # and for a lone worker (Worker#stop_after_delay), which wait each in its
  # own way.
  class ShutdownDelay
    # The TERM (or INT, QUIT, POST /stop) that started the delay.
    attr_reader :why

    def initialize(seconds)
      @seconds = seconds
      @until = nil
      @why = nil
    end

    def seconds = @seconds

    # A stop asked at now: :drain (no delay, or it is over), :wait (the
    # delay starts), :again (asked again during the delay).
    def stop(why, now)
      return :drain if @seconds.zero? || over?(now)
      return :again if @until

      @until = now + @seconds
      @why = why
      :wait
    end

    # The delay runs or ran: readiness says 503.
    def begun? = !@until.nil?

    def over?(now) = !@until.nil? && now >= @until

    # When it ends (a monotonic time), nil when it has not begun.
    def ends_at = @until
  end
end
