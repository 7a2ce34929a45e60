# frozen_string_literal: true

module Oribi
  module Bench
    # `--threshold 'p99<200ms,success>99.9%'`: conditions on a run's result
    # that make `oribi bench` exit 1 when one fails, for CI gates.
    #
    #   METRIC OP VALUE, comma-separated; OP is <, <=, > or >=
    #   p50 p90 p99 p99.9 … (a percentile of the report's spectrum), min,
    #   mean, max: a latency with its unit (us, ms, s)
    #   success: % of requests answered 200–399
    #   errors: a count, or a % of requests
    #   rate, throughput: requests and successes per second (vegeta's)
    module Threshold
      Check = Struct.new(:text, :metric, :op, :limit, :percent, keyword_init: true)

      LATENCY_UNITS = { "us" => 1, "µs" => 1, "ms" => 1_000, "s" => 1_000_000 }.freeze
      FORM = /\A\s*(p\d+(?:\.\d+)?|min|mean|max|success|errors|rate|throughput)\s*(<=|>=|<|>)\s*(\d+(?:\.\d+)?)\s*(us|µs|ms|s|%)?\s*\z/

      module_function

      def parse(spec)
        spec.split(",").map do |part|
          m = FORM.match(part) or raise UsageError, "bad threshold #{part.strip.inspect} (e.g. p99<200ms, success>99.9%)"
          check(part.strip, m[1], m[2], m[3].to_f, m[4])
        end
      end

      def check(text, metric, op, number, unit)
        latency = metric.start_with?("p") || %w[min mean max].include?(metric)
        if latency
          raise UsageError, "threshold #{text}: a latency needs a unit (us, ms, s)" unless LATENCY_UNITS[unit]
          pct = metric.delete_prefix("p").to_f if metric.start_with?("p")
          if pct && Loadgen::SPECTRUM.none? { |p| (p - pct).abs < 1e-9 }
            raise UsageError, "threshold #{text}: not a percentile of the report " \
                              "(#{Loadgen::SPECTRUM.map { |p| "p#{fmt(p)}" }.join(' ')})"
          end

          return Check.new(text: text, metric: metric, op: op, limit: number * LATENCY_UNITS[unit])
        end
        percent = unit == "%"
        raise UsageError, "threshold #{text}: success is a percentage" if metric == "success" && !percent
        raise UsageError, "threshold #{text}: #{metric} takes no unit" if unit && !percent
        raise UsageError, "threshold #{text}: #{metric} is per second, not a percentage" if percent && %w[rate throughput].include?(metric)

        Check.new(text: text, metric: metric, op: op, limit: number, percent: percent)
      end

      def fmt(p) = p == p.floor ? p.to_i.to_s : p.to_s

      # [[check, value, ok, shown]] for a result; a run without responses
      # fails every latency threshold (there is no latency to hold to it).
      def evaluate(checks, result)
        t = Report.totals(result)
        checks.map do |c|
          value, shown = measure(c, result, t)
          ok = !value.nil? && value.public_send(c.op, c.limit)
          [c, value, ok, shown]
        end
      end

      def measure(c, r, t)
        case c.metric
        when "success"
          v = t[:total].positive? ? 100.0 * t[:ok] / t[:total] : 0.0
          [v, format("%.3f%%", v)]
        when "errors"
          v = c.percent ? (t[:total].positive? ? 100.0 * t[:errors] / t[:total] : 0.0) : t[:errors]
          [v, c.percent ? format("%.3f%%", v) : v.to_s]
        when "rate", "throughput"
          v = t[c.metric.to_sym]
          [v, format("%.2f/s", v)]
        else
          us = latency(c.metric, r)
          [us, us ? Report.duration(us * 1000) : "no responses"]
        end
      end

      def latency(metric, r)
        return r[:latency][metric.to_sym] if %w[min mean max].include?(metric)

        p = metric.delete_prefix("p").to_f
        (r[:percentiles] || []).find { |q, _| (q - p).abs < 1e-9 }&.last
      end

      # The report's lines: one per threshold, "ok" or "FAILED".
      def lines(evaluated)
        evaluated.map { |c, _, ok, shown| format("  %-24s %-14s %s", c.text, shown, ok ? "ok" : "FAILED") }
      end
    end
  end
end
