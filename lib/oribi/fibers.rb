# frozen_string_literal: true

module Oribi
  # fibers N: a worker runs its requests as fibers under a Fiber::Scheduler,
  # so that a request waiting (sleep, a socket, Net::HTTP, Queue#pop, a
  # Mutex) lets the others run instead of holding a thread: up to N at once,
  # all on one thread beside the loop's (docs/FIBERS.md). The scheduler is
  # the async gem's (on io-event: epoll, io_uring where the kernel has it),
  # the one Falcon runs on, loaded only in this mode: the app's Gemfile
  # names it.
  class Fibers
    def self.load!
      require "async"
    rescue LoadError => e
      raise Config::Error, "fibers needs the async gem (add gem \"async\" to the app's Gemfile): #{e.message}"
    end

    def initialize
      self.class.load!
      @drain = Thread::Queue.new
      @tasks = {}.compare_by_identity # the requests' tasks that run now
    end

    # The thread's life: each env the queue gives is served (the block) in
    # a task of its own, until the queue is closed and every task is done.
    def run(queue, &serve)
      Sync do |reactor|
        ender = reactor.async { end_requests(@drain.pop) }
        while (env = queue.pop) # waits as a fiber: the dispatcher's push wakes it
          reactor.async do |task|
            @tasks[task] = true
            serve.call(env)
          ensure
            @tasks.delete(task)
          end
        end
        ender.stop # the queue closed once every request ended
      end
    end

    # A drain began: the requests still running after grace seconds are
    # stopped where they wait (Async::Stop), streams above all.
    def end_after(grace) = Log.thread("fibers' drain") { @drain << grace } && nil

    # Whether e is the stop end_after raised: not the app's error.
    def stop?(error) = error.is_a?(Async::Stop)

    private

    def end_requests(grace)
      sleep grace # a fiber's sleep: the others go on
      Log.info("closing #{@tasks.size} open requests (the drain's grace, #{grace.round(1)} s, is over)") if @tasks.any?
      @tasks.keys.each(&:stop)
    end
  end
end
