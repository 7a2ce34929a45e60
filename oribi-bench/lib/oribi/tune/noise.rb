# frozen_string_literal: true

require "etc"
require "oribi/tune/resources"

module Oribi
  module Tune
    # How far a measurement can be trusted on a machine tune does not have
    # to itself: the spread of repeated runs (a 95% interval), how much of
    # the CPU other processes took meanwhile (/proc/stat less our own
    # processes; Linux only), and pairs of results that cannot both be true.
    module Noise
      module_function

      # Student's t, two-sided 95%, by degrees of freedom (1..10).
      T95 = [nil, 12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23].freeze
      # Other processes using this share of the machine (0.15 of its CPUs),
      # or steal this high, make a setting's numbers suspect.
      BUSY = 0.15
      STEAL = 0.05
      # More threads in as many workers, or more workers (up to the CPUs)
      # with as many threads, may gain nothing, or lose a little to
      # contention, but cannot lose half the rate.
      DROP = 2.0

      def t95(df) = T95[df] || (1.96 + 2.5 / df)

      # { mean:, half: (the 95% interval's half-width, nil for one sample), n: }
      def interval(samples)
        n = samples.size
        return nil if n.zero?

        mean = samples.sum.to_f / n
        return { mean: mean, half: nil, n: 1 } if n == 1

        sd = Math.sqrt(samples.sum { |x| (x - mean)**2 } / (n - 1))
        { mean: mean, half: t95(n - 1) * sd / Math.sqrt(n), n: n }
      end

      # Relative half-width of an interval (0 when unknown or empty).
      def spread(iv) = iv && iv[:half] && iv[:mean].positive? ? iv[:half] / iv[:mean] : 0.0

      # The interval of a setting's highest rate within the SLO: the search
      # bracket [lo, hi) (its resolution; hi nil when no rate failed),
      # widened by the run-to-run spread of the capacity measured in
      # repeated closed-loop runs (what noise does to the same setting).
      def rate_interval(lo, hi, capacity)
        rel = spread(capacity)
        [[lo * (1 - rel), 0.0].max, (hi || lo) * (1 + rel)]
      end

      # Whether others' load can be told: the machine's CPU time comes from
      # /proc/stat, and nothing portable gives it (macOS, the BSDs): there
      # no setting is marked busy, and the report says so once.
      def detects? = Platform.procfs?

      def proc_stat = detects? ? File.read("/proc/stat") : nil

      # The machine's CPU time from /proc/stat's first line, in seconds:
      # busy (user, nice, system, irq, softirq; guest is inside user),
      # steal (taken by the hypervisor), total (all of it, every CPU);
      # nil without it.
      def machine(stat = proc_stat)
        return nil unless stat

        f = stat[/^cpu\s+([\d ]+)$/, 1].split.map(&:to_i)
        user, nice, system, _idle, _iowait, irq, softirq, steal = f
        tick = Resources::TICK
        { busy: (user + nice + system + irq + softirq) / tick, steal: (steal || 0) / tick, total: f.first(8).sum / tick }
      end

      # A point in time: the machine's CPU and ours (this process, the load
      # generator in it, and the server's pids); nil when others' load
      # cannot be told.
      def snapshot(pids, stat: proc_stat, ours: nil)
        return nil unless stat

        ours ||= Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) + Resources.cpu_seconds(pids)
        { machine: machine(stat), ours: ours }
      end

      # What others did between two snapshots, as shares of the whole
      # machine (1.0: every CPU): { others:, steal: }; nil if no time passed.
      def others(a, b)
        total = b[:machine][:total] - a[:machine][:total]
        return nil unless total.positive?

        theirs = (b[:machine][:busy] - a[:machine][:busy]) - (b[:ours] - a[:ours])
        { others: (theirs / total).clamp(0.0, 1.0), steal: ((b[:machine][:steal] - a[:machine][:steal]) / total).clamp(0.0, 1.0) }
      end

      def busy?(share) = !share.nil? && (share[:others] >= BUSY || share[:steal] >= STEAL)

      # Pairs of measured settings that cannot both be right, the lower one
      # suspect (noise only ever slows a run down): [{ low:, high:, why: }].
      # A setting with no rate within the SLO counts as rate 0 (unless it
      # did not run: a boot failure, the memory limit, an interruption).
      def contradictions(results, cpus: Etc.nprocessors)
        runs = results.select { |r| r[:workers] && (r[:rate] || r[:status] == :slo) }
        runs.product(runs).filter_map do |a, b|
          more = more_of(a, b, cpus) or next
          next unless (b[:rate] || 0) * DROP < a[:rate].to_f

          { low: b, high: a, why: format("%s %s with more %s than %s at %.0f/s", name(b), b[:rate] ? format("%.0f/s", b[:rate]) : "no rate",
                                         more, name(a), a[:rate]) }
        end
      end

      # "threads" or "workers" when b has more of one and as much of the
      # other as a (workers counted up to the CPUs); else nil.
      def more_of(a, b, cpus)
        if a[:workers] == b[:workers] && b[:threads] > a[:threads] then "threads"
        elsif a[:threads] == b[:threads] && b[:workers] > a[:workers] && b[:workers] <= cpus then "workers"
        end
      end

      def name(r) = "#{r[:workers]}w×#{r[:threads]}t"
    end
  end
end
