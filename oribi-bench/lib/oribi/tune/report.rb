# frozen_string_literal: true

require "json"
require "oribi/tune/recommend"
require "oribi/tune/server"

module Oribi
  module Tune
    # What `oribi tune` prints and writes, as pure functions of the run:
    # the table, the recommendation lines, and the JSON document (the HTML
    # page is tune/plot.rb, built from the same document).
    #
    # run: { slo:, path:, duration:, tolerance:, memory_limit:, results: [result],
    #        contradictions: [{ low:, high:, why: }] (left after measuring again),
    #        noise_detection: (false: others' load was not measured) };
    # result: { workers:, threads:, status:, note:, rate: (the highest
    #           passing rate), interval: [lo, hi] (req/s, Noise.rate_interval),
    #           capacity: { mean:, half:, runs: } (closed loop, req/s),
    #           busy: { others:, steal: } (shares of the machine),
    #           remeasured: [first rate, second rate],
    #           throughput: (answered per second at it),
    #           latency: { p50:, p95:, p99: } (seconds), cpu: (CPU seconds
    #           per second), memory: { master_rss:, master_pss:, worker_rss:,
    #           worker_pss:, total_rss:, total_pss: } (bytes; PSS nil
    #           without /proc), steps: [...] }
    module Report
      module_function

      STATUS = {
        ok: "ok", slo: "no rate within SLO", memory: "over memory limit",
        projected: "skipped: projected over memory limit", boot: "did not boot", interrupted: "interrupted"
      }.freeze

      def size(bytes)
        return "-" if bytes.nil?
        return format("%.1fGiB", bytes / 1024.0**3) if bytes >= 1024**3

        format("%.1fMiB", bytes / 1024.0**2)
      end

      def ms(seconds) = seconds.nil? ? "-" : format("%.1fms", seconds * 1000)

      def label(r)
        return "the server" unless r[:workers]

        "#{r[:workers]} worker#{'s' unless r[:workers] == 1} × #{r[:threads]} thread#{'s' unless r[:threads] == 1}"
      end

      def table(run)
        rec = recommendation(run)
        head = ["workers", "threads", "max rate", "95% interval", "throughput", "p50", "p95", "p99", "CPU", "others",
                "RSS/worker", "PSS/worker", "total RSS", "note"]
        rows = run[:results].map do |r|
          m = r[:memory] || {}
          [r[:workers] || "-", r[:threads] || "-",
           r[:rate] ? format("%.0f/s", r[:rate]) : "-",
           r[:interval] ? format("%.0f–%.0f", *r[:interval]) : "-",
           r[:throughput] ? format("%.1f/s", r[:throughput]) : "-",
           ms(r.dig(:latency, :p50)), ms(r.dig(:latency, :p95)), ms(r.dig(:latency, :p99)),
           r[:cpu] ? format("%.0f%%", r[:cpu] * 100) : "-",
           r[:busy] ? format("%.0f%%%s", r[:busy][:others] * 100, Noise.busy?(r[:busy]) ? " busy" : "") : "-",
           size(m[:worker_rss]), size(m[:worker_pss]), size(m[:total_rss]),
           note(r, rec)]
        end
        widths = head.each_index.map { |i| ([head] + rows).map { |row| row[i].to_s.size }.max }
        ([head] + rows).map do |row|
          row.each_with_index.map { |c, i| i == row.size - 1 ? c.to_s : c.to_s.rjust(widths[i]) }.join("  ").rstrip
        end.join("\n") << "\n"
      end

      def note(r, rec)
        marks = []
        marks << "best" if rec && rec[:best].equal?(r)
        marks << "recommended" if rec && rec[:cheapest].equal?(r)
        marks << STATUS.fetch(r[:status]) unless r[:status] == :ok
        marks << r[:note] if r[:note]
        marks << format("measured again: %s, then %s", *r[:remeasured].map { |x| x ? format("%.0f/s", x) : "no rate" }) if r[:remeasured]
        marks.join("; ")
      end

      def recommendation(run) = Recommend.call(run[:results], memory_limit: run[:memory_limit], tolerance: run[:tolerance] || 0)

      def confidence(run, rec = recommendation(run))
        Recommend.confidence(run[:results], rec, contradictions: run[:contradictions] || [], tolerance: run[:tolerance] || 0)
      end

      def window(run) = ([Recommend::WITHIN, run[:tolerance] || 0].max * 100).round

      def summary(run)
        rec = recommendation(run)
        limit = run[:memory_limit] ? ", total RSS ≤ #{size(run[:memory_limit])}" : ""
        return "No setting met the SLO (#{run[:slo]}#{limit}).\n" unless rec

        b = rec[:best]
        c = rec[:cheapest]
        out = +"Best throughput within the SLO (#{run[:slo]}#{limit}): #{label(b)}, #{format('%.0f', b[:rate])} req/s, " \
               "p99 #{ms(b.dig(:latency, :p99))}, total RSS #{size(b.dig(:memory, :total_rss))}\n"
        out << "Recommended (least memory within #{window(run)}% of the best): #{label(c)}, " \
               "#{format('%.0f', c[:rate])} req/s, p99 #{ms(c.dig(:latency, :p99))}, total RSS #{size(c.dig(:memory, :total_rss))}\n"
        conf = confidence(run, rec)
        if conf[:level] == :none
          out << "No clear winner: #{conf[:reasons].join('; ')}.\n" \
                 "Measure again on a quieter machine, with longer probes (-d) or more capacity runs (--repeat).\n"
          return out
        end
        out << "Confidence: #{conf[:level]}#{": #{conf[:reasons].join('; ')}" unless conf[:reasons].empty?}.\n"
        out << "Run it with: #{Server.fill(run[:run_with] || Server::RUN_WITH['oribi'], c[:workers], c[:threads])}\n" if c[:workers]
        out
      end

      def text(run) = table(run) + "\n" + why(run) + noise(run) + summary(run)

      # Why the table's "others" column is empty on macOS and the BSDs.
      def noise(run) = run[:noise_detection] == false ? "Others' load: not measured (noise detection needs /proc).\n" : ""

      # What the numbers say, per worker count: the rate, p99 and CPU as
      # threads grow, and whether the CPU it may use (one core per worker:
      # the GVL; the machine's CPUs) was the limit; then memory per worker.
      def why(run)
        ok = run[:results].select { |r| r[:rate] && r[:workers] }
        return "" if ok.empty?

        out = +"Why, at the highest rate within the SLO:\n"
        ok.group_by { |r| r[:workers] }.sort.each do |w, rs|
          steps = rs.sort_by { |r| r[:threads] }.map do |r|
            format("%dt %.0f/s (p99 %s, CPU %s)", r[:threads], r[:rate], ms(r.dig(:latency, :p99)), r[:cpu] ? format("%.0f%%", r[:cpu] * 100) : "-")
          end
          out << "  #{w} worker#{'s' unless w == 1}: #{steps.join(' → ')}#{limit(w, rs, run[:cpus])}\n"
        end
        m = ok.filter_map { |r| r[:memory] }.max_by { |x| x[:worker_rss] }
        pss = " (#{size(m[:worker_pss])} PSS)" if m&.[](:worker_pss)
        out << "  memory: each worker #{size(m[:worker_rss])} RSS#{pss}, the master #{size(m[:master_rss])}\n" if m
        out << "\n"
      end

      # "; CPU-bound: ..." when the most CPU a worker count used is near
      # what it can use: one core per worker (the GVL), the machine's CPUs.
      def limit(workers, rs, cpus)
        top = rs.filter_map { |r| r[:cpu] }.max or return ""
        cores = cpus ? [workers, cpus].min : workers
        return "" unless top >= 0.8 * cores

        workers < (cpus || workers) ? "; at #{cores} core#{'s' unless cores == 1} (the GVL: one per worker)" : "; at the machine's #{cores} CPUs"
      end

      def round(x, digits = 3) = x&.round(digits)

      def document(run)
        rec = recommendation(run)
        conf = confidence(run, rec)
        pick = ->(r) { r && { workers: r[:workers], threads: r[:threads], max_rate: round(r[:rate], 1), throughput: round(r[:throughput], 1) } }
        {
          slo: run[:slo].to_s, path: run[:path], cpus: run[:cpus], duration_s: run[:duration], tolerance: run[:tolerance],
          memory_limit_bytes: run[:memory_limit],
          settings: run[:results].map do |r|
            {
              workers: r[:workers], threads: r[:threads], status: STATUS.fetch(r[:status]), note: r[:note],
              max_rate: round(r[:rate], 1), rate_interval: r[:interval]&.map { |x| round(x, 1) },
              capacity: r[:capacity] && { mean: round(r[:capacity][:mean], 1), half: round(r[:capacity][:half], 1),
                                          runs: r[:capacity][:runs]&.map { |x| round(x, 1) } },
              throughput: round(r[:throughput], 1),
              latency_ms: %i[p50 p95 p99].to_h { |k| [k, round(r.dig(:latency, k)&.*(1000))] },
              cpu_percent: round(r[:cpu]&.*(100), 1),
              others_cpu_percent: round(r.dig(:busy, :others)&.*(100), 1), steal_percent: round(r.dig(:busy, :steal)&.*(100), 1),
              busy: Noise.busy?(r[:busy]), remeasured: r[:remeasured]&.map { |x| round(x, 1) },
              memory_bytes: r[:memory],
              steps: (r[:steps] || []).map do |s|
                { rate: round(s[:rate], 1), throughput: round(s[:throughput], 1),
                  p99_ms: round(s.dig(:latency, :p99)&.*(1000)), pass: s[:pass], why: s[:why],
                  others_percent: round(s.dig(:busy, :others)&.*(100), 1) }
              end
            }
          end,
          contradictions: (run[:contradictions] || []).map { |c| c[:why] },
          recommendation: rec && { best: pick.(rec[:best]), cheapest: pick.(rec[:cheapest]),
                                   confidence: conf[:level].to_s, reasons: conf[:reasons] }
        }
      end

      def json(run) = JSON.pretty_generate(document(run)) << "\n"
    end
  end
end
