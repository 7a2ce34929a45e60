# frozen_string_literal: true

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
