# frozen_string_literal: true

module Oribi
  # max_worker_memory, the master's part: once a second it measures each
  # worker (PSS from /proc/PID/smaps_rollup, which splits the pages a
  # preloaded app shares with its siblings; RSS where the kernel lacks it)
  # and recycles one that outgrew the limit: the worker drains like a
  # rolling restart's (it finishes what it has in flight and takes no new
  # request; the others take the backlog), and once it is gone the master
  # starts its replacement, so that two of them never hold the memory at
  # once. The default is memory.max ÷ workers when the cgroup limits memory
  # (lib/oribi/cgroup.rb), else off.
  module WorkerMemory
    CHECK_EVERY = 1.0 # seconds between two looks
    MIB = 1024.0 * 1024

    # [bytes, "PSS" or "RSS"] of a process, nil when it cannot be read.
    def self.measure(pid)
      kib = File.read("/proc/#{pid}/smaps_rollup")[/^Pss:\s+(\d+) kB/, 1]
      return [Integer(kib, 10) * 1024, "PSS"] if kib

      rss = Stats.rss(pid)
      rss && [rss, "RSS"]
    rescue SystemCallError
      rss = Stats.rss(pid)
      rss && [rss, "RSS"]
    end

    def self.mib(bytes) = format("%.1f MiB", bytes / MIB)

    private

    # [bytes, why] of the limit per worker; bytes 0 when off.
    def memory_limit
      set = @config[:max_worker_memory]
      return [set, "max_worker_memory"] unless set.nil?

      mem = Cgroup.current.memory_max or return [0, "off"]
      [mem.bytes / [@count, 1].max, "#{mem.why} ÷ #{@count} worker#{'s' if @count > 1}"]
    end

    # Says at start what the limit is when the cgroup set it.
    def announce_memory_limit
      limit, why = memory_limit
      return unless limit.positive? && @config[:max_worker_memory].nil?

      Log.info("max_worker_memory #{WorkerMemory.mib(limit)} per worker (#{why})")
    end

    def memory_check_at
      @memory_check_at ||= now + CHECK_EVERY
    end

    def enforce_memory
      return if now < memory_check_at || stopping?

      @memory_check_at = now + CHECK_EVERY
      limit, = memory_limit
      return unless limit.positive?

      @children.each_value do |child|
        next unless child.booted && !child.retiring && !child.recycling && !child.mold

        used, kind = WorkerMemory.measure(child.pid)
        next unless used && used > limit

        served = @scoreboard.stats(child.row)[:served]
        Log.info("worker[#{child.index}] pid #{child.pid}: #{kind} #{WorkerMemory.mib(used)} over " \
                 "max_worker_memory #{WorkerMemory.mib(limit)} after #{served} requests: recycling")
        child.recycling = true
        signal(child.pid, :USR2) # drain without the backlog; replaced once it exits
      end
    end
  end
end
