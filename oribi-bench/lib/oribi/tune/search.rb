# frozen_string_literal: true

module Oribi
  module Tune
    # The highest passing rate, by bisection rather than a fixed list of
    # rates: probe the capacity estimate, double while it passes (or halve
    # while it fails) to bracket the answer, then bisect the bracket until it
    # is within `tolerance` of its low end. Never more than `max_steps`
    # probes. `measure.call(rate, step)` runs the load and returns a Hash
    # with at least `pass:` (true when success was 100% and the SLO held);
    # `stop: true` in it ends the search there (the user interrupted).
    # A failure at or below `confirm_below` (a rate the server has shown
    # it can serve: the closed-loop estimate) is probed once more before it
    # counts: on a busy machine one stall can fail a probe, and the search
    # would never climb back.
    class Search
      Result = Struct.new(:rate, :sample, :steps, :bracket, keyword_init: true) do
        def passed? = !sample.nil?
      end

      attr_reader :max_steps

      def initialize(measure:, tolerance: 0.05, max_steps: 8, min_rate: 1.0, confirm_below: 0)
        raise ArgumentError, "max_steps must be at least 1" unless max_steps >= 1

        @measure = measure
        @tolerance = tolerance
        @max_steps = max_steps
        @min_rate = min_rate
        @confirm_below = confirm_below
      end

      # Result#rate is nil when even min_rate failed (or no probe passed
      # before the steps ran out); bracket is [lo, hi] as last known (hi nil
      # when no failing rate was found: the bound is at least lo).
      def run(start)
        @steps = []
        lo = hi = nil
        best = nil
        rate = [start.to_f, @min_rate].max
        # Bracket: double from a pass, halve from a failure.
        loop do
          s = probe(rate) or break
          if s[:pass]
            lo = rate
            best = s
            break if hi

            rate *= 2
          else
            hi = rate
            break if lo || rate <= @min_rate

            rate = [rate / 2, @min_rate].max
          end
        end
        # Bisect, arithmetically: the bracket is at most a factor of 2 wide.
        while lo && hi && (hi - lo) > @tolerance * lo && (s = probe(mid = (lo + hi) / 2))
          if s[:pass]
            lo = mid
            best = s
          else
            hi = mid
          end
        end
        Result.new(rate: lo, sample: best, steps: @steps, bracket: [lo, hi])
      end

      private

      def probe(rate, again: true)
        return nil if @steps.size >= @max_steps || @steps.last&.dig(:stop)

        s = @measure.call(rate, @steps.size + 1).merge(rate: rate)
        @steps << s
        return nil if s[:stop]
        return probe(rate, again: false) || s if again && !s[:pass] && rate <= @confirm_below

        s
      end
    end
  end
end
