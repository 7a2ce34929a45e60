# frozen_string_literal: true

module Oribi
  # Refork (docs/REFORK.md): a worker that served long enough to be warm —
  # its lazily built caches, its code paths' inline caches — is promoted by
  # the master to be the mold. It stops serving and from then on only forks
  # new workers on the master's request, so they start with its warm memory,
  # shared copy-on-write among all of them instead of each warming its own.
  #
  # Each one is forked through a middle process that exits at once, so the
  # worker is adopted by the master (a child subreaper) and supervised like
  # any other. The master and the mold talk over the mold's link (a unix
  # socketpair made when the worker was forked): "spawn INDEX ROW" one
  # way; the other, the new worker's pid with the master's end of the new
  # worker's own link (SCM_RIGHTS), so that it can be promoted in turn.
  # The link's EOF (the master closed it, or died) ends the mold.
  class Mold
    def initialize(server, app, link:, ready:, scoreboard:, generation:)
      @server = server
      @app = app
      @link = link
      @ready = ready
      @scoreboard = scoreboard
      @generation = generation
    end

    SIGNALS = %w[TERM INT QUIT USR2].freeze # each one ends the mold

    def run
      SIGNALS.each { |sig| trap(sig) { exit!(0) } }
      trap("URG", "IGNORE")
      Process.setproctitle("oribi mold (generation #{@generation})")
      # What is garbage now would be copied into every worker: collect it
      # and pack the heap once, before the first fork.
      GC.start
      GC.compact if GC.respond_to?(:compact)
      @link.write("mold #{Process.pid}\n")
      while (line = @link.gets)
        cmd, index, row = line.split
        spawn(Integer(index, 10), Integer(row, 10)) if cmd == "spawn"
      end
    end

    private

    def spawn(index, row)
      ours, theirs = UNIXSocket.pair
      r, w = IO.pipe
      middle = fork do
        Signals.quiet(SIGNALS) # the mold's handlers are not the worker's (Signals.quiet)
        r.close
        ours.close
        pid = fork do
          Worker.run_forked(@server, @app, index: index, ready: @ready, scoreboard: @scoreboard, row: row,
                                           link: theirs, generation: @generation + 1) do
            @link.close
            w.close
          end
        end
        w.write(pid.to_s)
        exit!(0)
      end
      w.close
      theirs.close
      Process.wait(middle)
      pid = r.read.to_i
      r.close
      @link.sendmsg("#{pid}\n", 0, nil, Socket::AncillaryData.unix_rights(ours))
    ensure
      ours&.close
    end
  end
end
