# frozen_string_literal: true

require "json"

module Oribi
  module Bench
    # Turns a run's result (the Hash from Oribi::Loadgen.run, latencies in
    # microseconds) into the reports an operator reads: vegeta's text
    # layout, JSON (durations in nanoseconds, as vegeta's), and a histogram.
    # Pure functions of the result, so golden files can pin them down.
    module Report
      module_function

      OK = (200...400)

      def totals(r)
        errors = r[:errors].values.sum
        total = r[:requests] + errors
        ok = r[:status].sum { |code, n| OK.cover?(code) ? n : 0 }
        attack = r[:attack] || r[:elapsed]
        { total: total, ok: ok, errors: errors, elapsed: r[:elapsed], attack: attack,
          wait: [r[:elapsed] - attack, 0].max,
          rate: attack.positive? ? total / attack : 0.0,
          throughput: r[:elapsed].positive? ? ok / r[:elapsed] : 0.0 }
      end

      # Go's time.Duration#String, which vegeta's text report prints.
      def duration(ns)
        ns = ns.round
        return "0s" if ns.zero?
        return "#{ns}ns" if ns < 1_000
        return "#{trim(ns / 1e3)}µs" if ns < 1_000_000
        return "#{trim(ns / 1e6)}ms" if ns < 1_000_000_000

        s = ns / 1e9
        return "#{trim(s)}s" if s < 60

        m, s = (ns / 1_000_000_000).divmod(60)
        frac = trim(s + (ns % 1_000_000_000) / 1e9)
        m < 60 ? "#{m}m#{frac}s" : "#{m / 60}h#{m % 60}m#{frac}s"
      end

      def trim(x)
        format("%.9f", x).sub(/0+\z/, "").sub(/\.\z/, "")
      end

      def us_ns(us) = us.nil? ? 0 : (us * 1000).round

      def text(r)
        t = totals(r)
        lat = r[:latency]
        sec = ->(x) { duration(x * 1e9) }
        lines = []
        lines << format("Requests      [total, rate, throughput]         %d, %.2f, %.2f",
                        t[:total], t[:rate], t[:throughput])
        lines << "Duration      [total, attack, wait]             " \
                 "#{sec.(t[:elapsed])}, #{sec.(t[:attack])}, #{sec.(t[:wait])}"
        lines << "Latencies     [min, mean, 50, 90, 95, 99, 99.9, max]  " +
                 %i[min mean p50 p90 p95 p99 p999 max].map { |k| duration(us_ns(lat[k])) }.join(", ")
        lines << format("Bytes In      [total, mean]                     %d, %.2f",
                        r[:bytes_in], t[:total].positive? ? r[:bytes_in].fdiv(t[:total]) : 0)
        lines << format("Bytes Out     [total, mean]                     %d, %.2f",
                        r[:bytes_out], t[:total].positive? ? r[:bytes_out].fdiv(t[:total]) : 0)
        lines << format("Success       [ratio]                           %.2f%%",
                        t[:total].positive? ? 100.0 * t[:ok] / t[:total] : 0)
        lines << "Status Codes  [code:count]                      " + status_codes(r, t).map { |c, n| "#{c}:#{n}" }.join("  ")
        lines.concat(schedule_lines(r, t)) if r[:late]
        lines << "Retried       [count]                           #{r[:retried]}" if r[:retried]&.positive?
        lines << "Error Set:"
        lines.concat(error_set(r))
        lines.join("\n") << "\n"
      end

      # Open loop: what was due and what went out.
      def schedule_lines(r, t)
        sent = r[:sent] || t[:total]
        scheduled = r[:scheduled] || (sent + (r[:dropped] || 0))
        lines = ["Schedule      [scheduled, sent, late, dropped]  #{scheduled}, #{sent}, #{r[:late]}, #{r[:dropped] || 0}"]
        lines << tool_limited(r, sent) if tool_limited?(r, sent)
        lines
      end

      # A shortfall (dropped, or more than 1% late) is the tool's when a
      # thread of it was on the CPU nearly all the run, or when most late
      # sends had a connection free: then the run measured the generator
      # (or a machine too busy to run it). A handful is scheduling noise.
      def tool_limited?(r, sent)
        behind = r[:behind] || 0
        short = (r[:dropped] || 0).positive? || r[:late] * 100 > sent
        short && ((r[:busy] || 0) >= 0.8 || (behind * 2 > r[:late] && behind >= 10))
      end

      def tool_limited(r, _sent)
        format("Warning: the load generator was the limit (busiest thread %d%% on CPU, %d late sends " \
               "with a connection free): these numbers measure it, not the server; " \
               "add threads (-T), lower the rate or run it on another machine",
               ((r[:busy] || 0) * 100).round, r[:behind] || 0)
      end

      # "connect: 5 (ECONNREFUSED 3, EMFILE 2)": the kind, then its errnos.
      def error_set(r)
        r[:errors].filter_map do |kind, n|
          next unless n.positive?

          causes = (r[:causes] || {})[kind]&.filter_map { |e, k| "#{errno_name(e)} #{k}" unless e.zero? } || []
          causes << r[:tls_error] if kind == :tls && r[:tls_error]
          causes.any? ? "#{kind}: #{n} (#{causes.join(', ')})" : "#{kind}: #{n}"
        end
      end

      def errno_name(e)
        klass = SystemCallError.new(nil, e).class
        klass == SystemCallError ? "errno #{e}" : klass.name.delete_prefix("Errno::")
      end

      # vegeta counts a request that never got a response as status 0.
      def status_codes(r, t)
        codes = r[:status].sort.to_h
        codes = { 0 => t[:errors] }.merge(codes) if t[:errors].positive?
        codes
      end

      # Threshold lines after a text report; "" when none were given.
      def thresholds(judged)
        return "" if judged.empty?

        (["Thresholds    [threshold, value, result]"] + Threshold.lines(judged)).join("\n") << "\n"
      end

      def json(r, thresholds: [])
        t = totals(r)
        lat = r[:latency]
        mean = ->(x) { t[:total].positive? ? x.fdiv(t[:total]) : 0 }
        h = {
          latencies: {
            total: lat[:mean] ? (lat[:mean] * 1000 * r[:requests]).round : 0,
            mean: us_ns(lat[:mean]), "50th": us_ns(lat[:p50]), "90th": us_ns(lat[:p90]),
            "95th": us_ns(lat[:p95]), "99th": us_ns(lat[:p99]), "99.9th": us_ns(lat[:p999]),
            max: us_ns(lat[:max]), min: us_ns(lat[:min])
          },
          percentiles: (r[:percentiles] || []).map { |p, us| { percentile: p, latency: us_ns(us) } },
          bytes_in: { total: r[:bytes_in], mean: mean.(r[:bytes_in]) },
          bytes_out: { total: r[:bytes_out], mean: mean.(r[:bytes_out]) },
          duration: (t[:attack] * 1e9).round,
          wait: (t[:wait] * 1e9).round,
          requests: t[:total], rate: t[:rate], throughput: t[:throughput],
          success: t[:total].positive? ? t[:ok].fdiv(t[:total]) : 0,
          status_codes: status_codes(r, t).transform_keys(&:to_s),
          errors: error_set(r),
          error_counts: r[:errors]
        }
        h[:retried] = r[:retried] || 0
        h.merge!(tls_handshakes: r[:tls_handshakes], tls_resumed: r[:tls_resumed]) if r[:tls_handshakes]
        h.merge!(late: r[:late], dropped: r[:dropped] || 0) if r[:late]
        h.merge!(scheduled: r[:scheduled], sent: r[:sent], behind: r[:behind], busy: r[:busy]) if r[:scheduled]
        unless thresholds.empty?
          h[:thresholds] = thresholds.map { |c, value, ok, _| { threshold: c.text, value: value, ok: ok } }
        end
        JSON.pretty_generate(h) << "\n"
      end

      # Latency distribution as bars over the percentile spectrum.
      def histogram(r, width: 40)
        spec = r[:percentiles] || []
        return "no responses\n" if spec.empty?

        top = spec.map(&:last).max.to_f
        lines = ["Percentile   Latency       "]
        spec.each do |p, us|
          bar = top.positive? ? "#" * (us / top * width).ceil : ""
          lines << format("%-10s  %-12s  %s", format("%g%%", p), duration(us * 1000), bar)
        end
        lines.join("\n") << "\n"
      end
    end
  end
end
