# frozen_string_literal: true

module Oribi
  # max_worker_memory, the master's part: once a second it measures each
  # worker (PSS from /proc/PID/smaps_rollup, which splits the pages a
  # preloaded app shares with its siblings; RSS where the kernel lacks it,
  # and from ps without /proc: macOS and the BSDs have no PSS, so there
  # each worker counts the shared pages in full and reaches a limit
  # sooner) and recycles one that outgrew the limit: the worker drains
  # like a rolling restart's (it finishes what it has in flight and takes
  # no new request) while the master starts its replacement at once, so
  # that a drain held up by a client reading nothing never leaves the
  # listeners without a worker, even with one. The replacement is a fresh
  # worker, small; it is not recycled in turn while the one it replaces
  # still drains, so that an index never has more than two. The default
  # is memory.max ÷ workers when the cgroup limits memory
  # (lib/oribi/cgroup.rb), else off.
  class WorkerMemory
    CHECK_EVERY = 1.0 # seconds between two looks
    MIB = 1024.0 * 1024

    # {pid => [bytes, "PSS" or "RSS"]} of the pids that could be read.
    def self.measure(pids)
      found = Platform.procfs? ? pids.to_h { |pid| [pid, pss(pid)] }.compact.transform_values { |b| [b, "PSS"] } : {}
      found.merge(Platform.rss_of(pids - found.keys).transform_values { |b| [b, "RSS"] })
    end

    # PSS in bytes from /proc, nil when the kernel does not say.
    def self.pss(pid)
      kib = File.read("/proc/#{pid}/smaps_rollup")[/^Pss:\s+(\d+) kB/, 1]
      kib && Integer(kib, 10) * 1024
    rescue SystemCallError
      nil
    end

    def self.mib(bytes) = format("%.1f MiB", bytes / MIB)

    def initialize(config)
      @config = config
      @check_at = nil
    end

    # [bytes, why] of the limit per worker; bytes 0 when off. count: the
    # workers the master runs now (the cgroup's share follows it).
    def limit(count)
      set = @config[:max_worker_memory]
      return [set, "max_worker_memory"] unless set.nil?

      mem = Cgroup.current.memory_max or return [0, "off"]
      [mem.bytes / [count, 1].max, "#{mem.why} / #{count} worker#{'s' if count > 1}"]
    end

    # Says at start what the limit is when the cgroup set it.
    def announce(count)
      limit, why = limit(count)
      return unless limit.positive? && @config[:max_worker_memory].nil?

      Log.info("max_worker_memory #{WorkerMemory.mib(limit)} per worker (#{why})")
    end

    # When the master must look next; nil when there is no limit.
    def deadline(count, now)
      @check_at ||= now + CHECK_EVERY if limit(count).first.positive?
    end

    # Once a second: each serving worker over the limit is recycled
    # (workers: the master's Workers).
    def enforce(workers, count, now)
      return if now < (@check_at ||= now + CHECK_EVERY)

      @check_at = now + CHECK_EVERY
      limit, = limit(count)
      return unless limit.positive?

      draining = workers.values.select { |child| child.leaving? && !child.mold }.map(&:index) # a mold stays
      live = workers.values.select { |child| child.booted && !child.leaving? && !child.mold && !draining.include?(child.index) }
      measured = WorkerMemory.measure(live.map(&:pid))
      live.each do |child|
        used, kind = measured[child.pid]
        next unless used && used > limit

        served = workers.scoreboard.stats(child.row)[:served]
        Log.info("worker[#{child.index}] pid #{child.pid}: #{kind} #{WorkerMemory.mib(used)} over " \
                 "max_worker_memory #{WorkerMemory.mib(limit)} after #{served} requests: recycling")
        workers.recycle(child)
      end
    end
  end
end
