# frozen_string_literal: true

module Oribi
  module Bench
    # The live line on a terminal: elapsed, requests, current rate, errors,
    # rewritten in place; erased when the run ends, before the report.
    class Progress
      def initialize(io, clock: -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) })
        @io = io
        @clock = clock
        @start = @last_t = clock.call
        @last_n = 0
      end

      def update(done, failed)
        now = @clock.call
        n = done + failed
        rate = now > @last_t ? (n - @last_n) / (now - @last_t) : 0.0
        @last_t = now
        @last_n = n
        @io.write("\r\e[K" + self.class.line(now - @start, n, rate, failed))
        @io.flush
      end

      def finish
        @io.write("\r\e[K")
        @io.flush
      end

      def self.line(elapsed, requests, rate, errors)
        format("%.1fs  %d requests  %.0f/s  %d errors", elapsed, requests, rate, errors)
      end
    end
  end
end
