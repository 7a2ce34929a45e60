# frozen_string_literal: true

module Oribi
  # Signals as a queue read from a self-pipe: trap handlers only record the
  # signal and write a byte, so the loop that acts on them never races them
  # (a CHLD arriving while the master is busy is simply read next time).
  class Signals
    def initialize(names)
      @queue = []
      @reader, @writer = IO.pipe
      [@reader, @writer].each { |io| io.close_on_exec = true }
      names.each do |name|
        trap(name) do
          @queue << name
          @writer.write_nonblock(".", exception: false)
        end
      end
      @names = names
    end

    # Waits up to timeout seconds (nil: forever) for a signal, for one of
    # ios to become readable or one of writes writable; returns the signals
    # that arrived, oldest first (maybe none).
    def wait(timeout, ios = [], writes = [])
      IO.select([@reader, *ios], writes, nil, timeout) if @queue.empty?
      @reader.read_nonblock(1024, exception: false)
      taken = @queue.dup
      @queue.clear
      taken
    end

    # In a forked child: the parent's handlers and pipe are not its own.
    # Until the child traps its own, each of these signals does nothing
    # there (Signals.quiet).
    def reset
      Signals.quiet(@names)
      close
    end

    # A child forked a moment ago may see a signal that was sent to its
    # parent: on Ruby 3.3 and later one not yet handled when the parent
    # forked is handled in both. So until a child traps its own, the
    # signals its parent acts on do nothing there. None is lost: what is
    # meant for a worker, its master sends once the worker has booted
    # (Master#signal). CHLD keeps its default, which ignores it and leaves
    # waiting for children as it is.
    #
    # Such a signal can also wait in the child, unhandled, until something
    # makes Ruby look at its signals again (the first thread it starts),
    # when the child's own handlers are in: a USR2 sent to a master as it
    # forked stopped the new worker. A signal a process sends itself is
    # handled at once, with every one waiting: one here, while they all do
    # nothing, leaves none for later.
    def self.quiet(names)
      names.each { |name| trap(name, name == "CHLD" ? "DEFAULT" : NOTHING) }
      flush = names.find { |name| name != "CHLD" } and Process.kill(flush, Process.pid)
    end

    NOTHING = proc {} # a handler, not IGNORE: an exec'd program gets its defaults back

    # What each operator signal asks of the master (docs/SIGNALS.md has
    # both tables): Oribi's, or, when it runs from a Puma config, what the
    # same signal does to Puma's cluster, so a team's deploy tasks and
    # runbooks (`pumactl phased-restart`, Capistrano's puma tasks, a
    # logrotate that sends HUP) do what they did.
    MASTER = { "TERM" => :stop, "INT" => :stop, "QUIT" => :stop, "TTIN" => :more, "TTOU" => :fewer,
               "USR1" => :reopen_logs, "HUP" => :roll, "USR2" => :reexec }.freeze
    PUMA = MASTER.merge("USR1" => :roll, "HUP" => :reopen_logs_or_stop, "INFO" => :backtraces).freeze

    # The operator signals a master traps: SIGINFO only where there is one
    # (the BSDs, macOS; not Linux).
    def self.master_names = [*MASTER.keys, "CHLD", *("INFO" if Signal.list.key?("INFO"))]

    # The pipe, once others have trapped the signals (the handlers stay).
    def close
      @reader.close
      @writer.close
    end
  end
end
