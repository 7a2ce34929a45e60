# frozen_string_literal: true

module Oribi
  # The master's side of refork (docs/REFORK.md; the mold's side is
  # mold.rb): when to promote a worker to mold, and forking workers through
  # it. The master asks it (promoting, spawn, link to watch) and steps it
  # every loop turn; the workers are the master's (children: pid => Child),
  # the replacing is a RollingRestart.
  class Refork
    MOLD_TIMEOUT = 5.0 # how long the mold may take to fork a worker

    # how many molds there were: workers forked by the latest have it
    attr_reader :generation
    # the pid of the worker becoming the mold, nil when none
    attr_reader :promoting

    def initialize(config)
      @after = config[:refork_after]
      @generation = 0
      @mold = nil # the Child of the mold new workers fork from
      @promoting = nil
    end

    def on? = @after.any?

    # The link to read while a worker becomes the mold, nil when none.
    def promotion_link(children) = (children[@promoting]&.link if @promoting)

    # Once a worker served the next refork_after count, it is promoted to
    # be the mold; once it says it is one, every worker of an older
    # generation is replaced, one at a time as in a rolling restart, by one
    # the mold forks. scoreboard: the workers' rows; signal: the master's.
    def step(children, rolling, scoreboard, now, signal:)
      return watch_promotion(children, rolling, now) if @promoting
      return if rolling.any?

      threshold = @after[@generation] or return
      candidates = children.values.select { |s| s.booted && !s.leaving? && s.link }
      best, served = candidates.map { |s| [s, scoreboard.stats(s.row)[:served]] }.max_by(&:last)
      return if best.nil? || served < threshold

      Log.info("refork: worker[#{best.index}] pid #{best.pid} served #{threshold}+ requests: promoting it to mold")
      best.retiring = best.mold = true
      @promoting = best.pid
      signal.call(best.pid, :URG)
    end

    # → the Child of a worker the mold forked into row, nil when there is
    # no mold or it could not (then the master forks one itself).
    def spawn(index, row, scoreboard, now)
      return nil unless @mold

      link = @mold.link
      link.write("spawn #{index} #{row}\n")
      raise IOError, "no answer in #{MOLD_TIMEOUT} s" unless link.wait_readable(MOLD_TIMEOUT)

      data, _, _, rights = link.recvmsg(64, 0, 64, scm_rights: true)
      pid = data.to_i
      raise IOError, "bad answer #{data.inspect}" unless pid.positive?

      scoreboard.clear(row, pid, @generation)
      Workers::Child.new(index: index, pid: pid, started: now, booted: false, row: row,
                        link: rights&.unix_rights&.first, generation: @generation)
    rescue SystemCallError, IOError => e
      Log.error("refork: the mold (pid #{@mold.pid}) failed to fork worker[#{index}] (#{e.message}); forking it here")
      drop
      nil
    end

    # New workers come from the master again: EOF on its link, the mold exits.
    def drop
      return unless @mold

      @mold.link.close unless @mold.link.closed?
      @mold = nil
    end

    # A reaped worker that was (to be) the mold.
    def gone(child)
      @mold = nil if @mold.equal?(child)
      @promoting = nil if @promoting == child.pid
    end

    private

    def watch_promotion(children, rolling, now)
      child = children[@promoting]
      return @promoting = nil unless child # died: the next look picks another

      data = child.link.read_nonblock(64, exception: false)
      return if data == :wait_readable

      @promoting = nil
      return Log.error("refork: worker[#{child.index}] pid #{child.pid} did not become the mold") unless data&.start_with?("mold")

      drop
      @mold = child
      @generation += 1
      rolling.start(children.values.reject { |s| s.leaving? || s.generation >= @generation }.sort_by(&:index).map(&:pid), now)
      Log.info("refork: pid #{child.pid} is the mold of generation #{@generation}; reforking #{rolling.size} worker(s)")
    end
  end
end
