# frozen_string_literal: true

module Oribi
  # The master's side of refork (docs/REFORK.md; the mold's side is
  # mold.rb): when to promote a worker to mold, and forking workers through
  # it. Mixed into Master, whose state (@children, @mold, @generation,
  # @promoting, @rolling) it works on.
  module Refork
    MOLD_TIMEOUT = 5.0 # how long the mold may take to fork a worker

    private

    def refork? = @config[:refork_after].any?

    # Once a worker served the next refork_after count, it is promoted to
    # be the mold; once it says it is one, every worker of an older
    # generation is replaced, one at a time as in a rolling restart, by one
    # the mold forks.
    def refork
      return unless refork? && !stopping? && @hot.adopted.empty?
      return watch_promotion if @promoting
      return if @rolling.any?

      threshold = @config[:refork_after][@generation] or return
      candidates = @children.values.select { |s| s.booted && !s.leaving? && s.link }
      best, served = candidates.map { |s| [s, @scoreboard.stats(s.row)[:served]] }.max_by(&:last)
      return if best.nil? || served < threshold

      Log.info("refork: worker[#{best.index}] pid #{best.pid} served #{threshold}+ requests: promoting it to mold")
      best.retiring = best.mold = true
      @promoting = best.pid
      signal(best.pid, :URG)
    end

    def watch_promotion
      child = @children[@promoting]
      return @promoting = nil unless child # died: the next look picks another

      data = child.link.read_nonblock(64, exception: false)
      return if data == :wait_readable

      @promoting = nil
      return Log.error("refork: worker[#{child.index}] pid #{child.pid} did not become the mold") unless data&.start_with?("mold")

      drop_mold
      @mold = child
      @generation += 1
      @rolling.start(@children.values.reject { |s| s.leaving? || s.generation >= @generation }.sort_by(&:index).map(&:pid), now)
      Log.info("refork: pid #{child.pid} is the mold of generation #{@generation}; reforking #{@rolling.size} worker(s)")
    end

    # → the Child of a worker the mold forked, nil when it could not (then
    # the master forks one itself).
    def spawn_from_mold(index, row)
      link = @mold.link
      link.write("spawn #{index} #{row}\n")
      raise IOError, "no answer in #{MOLD_TIMEOUT} s" unless link.wait_readable(MOLD_TIMEOUT)

      data, _, _, rights = link.recvmsg(64, 0, 64, scm_rights: true)
      pid = data.to_i
      raise IOError, "bad answer #{data.inspect}" unless pid.positive?

      @scoreboard.clear(row, pid, @generation)
      @children[pid] = Master::Child.new(index: index, pid: pid, started: now, booted: false, row: row,
                             link: rights&.unix_rights&.first, generation: @generation)
    rescue SystemCallError, IOError => e
      Log.error("refork: the mold (pid #{@mold.pid}) failed to fork worker[#{index}] (#{e.message}); forking it here")
      drop_mold
      nil
    end

    def drop_mold
      return unless @mold

      @mold.link.close unless @mold.link.closed? # EOF: the mold exits
      @mold = nil
    end

    def mold_gone(child)
      @mold = nil if @mold.equal?(child)
      @promoting = nil if @promoting == child.pid
    end
  end
end
