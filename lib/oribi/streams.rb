# frozen_string_literal: true

module Oribi
  # Responses that stay open: an event stream, ActionController::Live, a
  # body that relays an upstream's answer as it comes. Once the app has
  # returned a body that streams, the engine carries the rest of the
  # response beyond the request pool (Engine#carry), so that `threads`
  # serve new requests meanwhile, up to max_streams per worker
  # (docs/THREADS.md, "Streams"). The body goes on on the thread that
  # called the app, and a new thread takes that one's place in the pool;
  # with one thread, whose worker runs the loop on it too, on a thread of
  # its own. This object knows which threads write a stream now, so that
  # a drain can end the streams still open when its grace is over.
  class Streams
    # Raised in a stream's thread once a drain's grace is over: the body
    # stops, its connection closes (an EventSource connects again).
    class Closed < Exception; end # rubocop:disable Lint/InheritException

    # Whether the body of a response streams: its bytes come as the body
    # yields them (each, call), not all at once (an Array, a body that
    # becomes one with to_ary, a file the loop sends).
    def self.body?(env, body)
      !body.is_a?(Array) && !body.respond_to?(:to_ary) && !body.respond_to?(:to_path) &&
        env[Rack::REQUEST_METHOD] != "HEAD"
    end

    def initialize
      @lock = Mutex.new
      @writing = {}.compare_by_identity # Thread => true while it writes a stream
    end

    # Runs the block, the rest of a response, as a stream of this thread's.
    def carry
      Thread.handle_interrupt(Closed => :never) do
        @lock.synchronize { @writing[Thread.current] = true }
        begin
          Thread.handle_interrupt(Closed => :immediate) { yield }
        ensure
          @lock.synchronize { @writing.delete(Thread.current) }
        end
      end
    rescue Closed
      nil # the drain's grace is over (or was, just as the stream ended)
    end

    # A drain began: the streams still open after grace seconds are ended.
    # (From a trap handler too: the thread does what a trap may not.)
    def close_after(grace)
      @closer ||= Log.thread("streams' drain") do
        sleep grace # the grace itself
        @lock.synchronize do
          Log.info("closing #{@writing.size} open streams (the drain's grace, #{grace.round(1)} s, is over)") if @writing.any?
          # Under the lock: a thread raised here is still inside #carry,
          # where the exception ends its stream and nothing else.
          @writing.each_key { |t| t.raise(Closed) }
        end
      end
    end
  end
end
