# frozen_string_literal: true

require "oribi/tune/noise"

module Oribi
  module Tune
    # Which setting to run, from the measured ones: the best throughput
    # inside the SLO (the highest rate the search found sustainable), and
    # the cheapest in memory within WITHIN (5%) of it. Memory is total RSS
    # (master + workers); settings within WITHIN of the least memory count
    # as equally cheap, and then fewer workers × threads wins (less to go
    # wrong, and on a CPU-bound app extra threads only wait for the GVL).
    # A setting over the memory limit is never chosen. When the search
    # stopped bisecting at a coarser tolerance, rates closer than that are
    # not told apart either: the window is the wider of the two.
    module Recommend
      module_function

      WITHIN = 0.05

      # results: Hashes with :workers, :threads, :rate (the highest passing
      # rate; nil: nothing passed), :memory (with :total_rss, bytes; nil
      # when unknown). Returns { best:, cheapest: } (two of the results,
      # maybe the same one) or nil when no setting qualifies.
      def call(results, memory_limit: nil, tolerance: 0)
        ok = results.select { |r| r[:rate] && !over_limit?(r, memory_limit) }
        return nil if ok.empty?

        within = [WITHIN, tolerance].max
        best = ok.max_by { |r| [r[:rate], -concurrency(r)] }
        near = ok.select { |r| r[:rate] >= (1 - within) * best[:rate] }
        least = near.map { |r| rss(r) }.min
        cheapest = near.select { |r| rss(r) <= least * (1 + WITHIN) }
                       .min_by { |r| [concurrency(r), -r[:rate]] }
        { best: best, cheapest: cheapest }
      end

      def over_limit?(r, limit) = !limit.nil? && !rss(r).zero? && rss(r) > limit

      def rss(r) = r.dig(:memory, :total_rss) || 0

      def concurrency(r) = (r[:workers] || 1) * (r[:threads] || 1)

      LEVELS = %i[high medium low none].freeze # :none: no clear winner

      # How sure the recommendation is, and why not more: { level:, reasons: }.
      # Each doubt raises the level to at most its own weight:
      # - the machine was busy (others' CPU, steal) during some settings: medium;
      #   during the best or the recommended one: low;
      # - a contradiction left after measuring again: low; involving the
      #   best or the recommended setting: none (the numbers cannot all be true);
      # - a setting measured again at more than twice (or half) its first
      #   rate: medium; the best or the recommended one: low;
      # - slower settings (outside the window) whose interval reaches the
      #   best's: medium; half of the settings with a rate or more: none;
      # - the recommended rate's interval wider than ±WIDE: medium.
      # results carry :interval ([lo, hi], req/s) and :busy ({ others:, steal: }).
      def confidence(results, rec, contradictions: [], tolerance: 0)
        return nil unless rec

        doubts = []
        key = [rec[:best], rec[:cheapest]]
        keyed = ->(r) { key.any? { |k| k.equal?(r) } }
        busy = results.select { |r| Noise.busy?(r[:busy]) }
        unless busy.empty?
          worst = busy.map { |r| r[:busy][:others] }.max
          steal = busy.map { |r| r[:busy][:steal] }.max
          doubts << [busy.any?(&keyed) ? 2 : 1,
                     format("the machine was busy during %d of %d settings (other processes used up to %.0f%% of the CPUs%s)",
                            busy.size, results.size, worst * 100, steal >= 0.005 ? format(", steal %.0f%%", steal * 100) : "")]
        end
        contradictions.each do |c|
          doubts << [keyed.(c[:low]) || keyed.(c[:high]) ? 3 : 2, "measured twice, still contradictory: #{c[:why]}"]
        end
        results.each do |r|
          next unless r[:remeasured]

          a, b = r[:remeasured].map(&:to_f)
          next unless [a, b].max > Noise::DROP * [a, b].min

          rates = r[:remeasured].map { |x| x ? format("%.0f/s", x) : "no rate" }
          doubts << [keyed.(r) ? 2 : 1, "#{Noise.name(r)} gave #{rates[0]}, then #{rates[1]} when measured again"]
        end
        doubts.concat(overlap_doubts(results, rec, tolerance))
        { level: LEVELS[doubts.map(&:first).max || 0], reasons: doubts.map(&:last) }
      end

      WIDE = 0.25

      def overlap_doubts(results, rec, tolerance)
        best = rec[:best]
        floor = (best[:interval] || [best[:rate]]).first
        ok = results.select { |r| r[:rate] }
        rivals = ok.select { |r| r[:interval] && r[:rate] < (1 - [WITHIN, tolerance].max) * best[:rate] && r[:interval].last >= floor }
        doubts = []
        unless rivals.empty?
          doubts << [rivals.size * 2 >= ok.size ? 3 : 1,
                     "#{rivals.map { |r| Noise.name(r) }.join(', ')} cannot be told from the best (their intervals reach it)"]
        end
        lo, hi = rec[:cheapest][:interval]
        rel = lo && hi.positive? ? (hi - lo).fdiv(hi + lo) : 0
        doubts << [1, format("the recommended rate is known to ±%.0f%% only", rel * 100)] if rel > WIDE
        doubts
      end

      # What `workers` workers of `threads` threads would hold, from a
      # measured setting with the same threads (the one with the most
      # workers): master + per-worker RSS × workers. nil when none measured.
      def projected_rss(results, workers, threads)
        base = results.select { |r| r[:threads] == threads && r[:memory] }.max_by { |r| r[:workers] }
        return nil unless base

        base[:memory][:master_rss] + base[:memory][:worker_rss] * workers
      end
    end
  end
end
