# frozen_string_literal: true

module Oribi
  module Tune
    # The service-level objective a rate must meet: `p99=200ms`, several
    # joined by commas (`p50=20ms,p99=200ms`). On top of the latency
    # bounds, every request must succeed (a 2xx/3xx status, no error) and
    # the server must keep up: complete requests at KEEP_UP of the offered
    # rate or better, from the first send to the last response less one
    # ordinary latency (p50: the last request's own). A short probe cannot
    # show an overload in its latency when the queue has no time to grow
    # past the SLO; its pace shows it (within KEEP_UP: a noisy machine
    # delays the last response of a good run too).
    class SLO
      class Error < StandardError; end

      PERCENTILES = { "p50" => :p50, "p90" => :p90, "p95" => :p95, "p99" => :p99, "p99.9" => :p999 }.freeze
      KEEP_UP = 0.9

      attr_reader :limits

      # limits: { p99: seconds, ... }
      def initialize(limits)
        raise Error, "empty SLO" if limits.empty?

        @limits = limits
      end

      def self.parse(text)
        limits = text.split(",").to_h do |part|
          m = /\A(p[\d.]+)=(\d+(?:\.\d+)?)(ms|s|us)?\z/.match(part.strip) or
            raise Error, "bad SLO #{part.inspect} (use p99=200ms)"
          key = PERCENTILES[m[1]] or raise Error, "bad percentile #{m[1]} (one of #{PERCENTILES.keys.join(', ')})"
          [key, m[2].to_f * { "ms" => 1e-3, "s" => 1.0, "us" => 1e-6, nil => 1e-3 }[m[3]]]
        end
        new(limits)
      end

      def to_s = @limits.map { |k, v| "#{PERCENTILES.key(k)}=#{format('%g', v * 1000)}ms" }.join(",")

      # The longest bound, in seconds: a request slower than many times it
      # has failed anyway, so it bounds the per-request timeout.
      def longest = @limits.values.max

      # nil when the sample meets the objective, else why not. sample:
      # { rate:, requests:, ok:, errors: { timeout: n, ... }, statuses: { 404 => n, ... },
      #   elapsed:, attack: (first to last send), latency: { p50:, p99: seconds, ... } }
      def violation(sample)
        return "no responses" if sample[:requests].zero?
        return failures(sample) if sample[:ok] < sample[:requests]


        if sample[:requests] > 1
          # n requests sent 1/rate apart: n - 1 intervals, then the last one's latency
          pace = (sample[:requests] - 1) / [sample[:elapsed] - (sample[:latency][:p50] || 0), sample[:attack], 1e-9].max
          return format("served %.0f/s of %.0f/s", pace, sample[:rate]) if pace < KEEP_UP * sample[:rate]
        end

        @limits.each do |k, limit|
          v = sample[:latency][k]
          return format("%s %.1fms > %.1fms", PERCENTILES.key(k), v * 1000, limit * 1000) if v.nil? || v > limit
        end
        nil
      end

      OK = (200...400)

      # "every answer was 404", or "7 of 100 failed (HTTP 500 ×5, timeout 2)":
      # the statuses other than 2xx/3xx, then the errors by kind.
      def failures(sample)
        bad = (sample[:statuses] || {}).reject { |code, _| OK.cover?(code) }
        return "every answer was #{bad.keys.first}" if bad.size == 1 && bad.values.first == sample[:requests]

        kinds = bad.sort.map { |code, n| "HTTP #{code} ×#{n}" } +
                (sample[:errors] || {}).select { |_, n| n.positive? }.map { |k, n| "#{k} #{n}" }
        "#{sample[:requests] - sample[:ok]} of #{sample[:requests]} failed#{" (#{kinds.join(', ')})" unless kinds.empty?}"
      end
    end
  end
end
