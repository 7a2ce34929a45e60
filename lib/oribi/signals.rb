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
    def reset
      @names.each { |name| trap(name, "DEFAULT") }
      close
    end

    # The pipe, once others have trapped the signals (the handlers stay).
    def close
      @reader.close
      @writer.close
    end
  end
end
