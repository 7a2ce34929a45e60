# frozen_string_literal: true

require "io/wait" # the master watch waits on the lifeline with a timeout
require "timeout"

module Oribi
  # Raised in the app's thread by soft_timeout with soft_timeout_raise.
  class RequestTimeout < Timeout::Error; end

  # One worker: the C engine owns the sockets and hands over complete
  # requests; this loop calls the app and gives back the response. It runs
  # in a forked child of the master, or in the server process itself with
  # `workers 0`. With `threads` > 1 the main thread only dispatches: a pool
  # of app threads serves the requests (docs/THREADS.md).
  class Worker
    ERROR_HEADERS = { "content-type" => "text/plain" }.freeze
    ERROR_BODY = ["Internal Server Error\n"].freeze
    NOT_IMPLEMENTED_BODY = ["Not Implemented\n"].freeze
    TITLE_EVERY = 256 # requests between process-title updates
    SIGNALS = %w[TERM INT QUIT USR1 USR2].freeze # what a lone worker traps before it binds

    class << self
      # In a forked worker: the read end of a pipe only the master writes to
      # (never does); EOF means the master is gone.
      attr_accessor :lifeline
    end

    attr_reader :index, :served

    # ready: an IO the master reads "index pid" lines from, nil standalone.
    # scoreboard: [Scoreboard, row] where the master watches this worker.
    # link: with refork, a socket to the master, which may promote this
    # worker to be the mold (SIGURG): it then drains and returns from #run
    # with #promoted? true, its listeners still open for the workers the
    # mold will fork.
    # early: a lone worker's (`workers 0`) Signals for SIGNALS, trapped
    # before it bound its listeners: what came while the app loaded is acted
    # on once it serves (the default TERM would reset the connections queued
    # so far; a master holds its workers' signals back until they boot).
    def initialize(server, app, index: 0, ready: nil, scoreboard: nil, link: nil, early: nil)
      @server = server
      @config = server.config
      @app = app
      @index = index
      @ready = ready
      @served = 0
      @limit = request_limit
      @standalone = ready.nil?
      Log.worker = index if @standalone # the lone server process is worker 0 too
      @scoreboard, @sb_row = scoreboard
      @link = link
      @early = early
      @threads = @config[:threads] + @config[:io_threads] # io_threads serve only beside the others (engine.c)
      @soft = @config[:soft_timeout].positive? && @config[:soft_timeout]
      @in_app = {} # Thread => [env, started]: requests inside the app, for soft_timeout
      @methods = @config[:http_methods].to_h { |m| [m, true] }.freeze unless @config[:http_methods].empty?
      @error_handler = @config[:lowlevel_error_handler]
      @fibers = Fibers.new if @config[:fibers].positive?
      # Fibers carry their own streams: a request's fiber writes its body.
      @streams = Streams.new if @config[:max_streams].positive? && !@fibers
      @fiber_per_request = @config[:fiber_per_request] && !@fibers
    end

    def run
      # rack.multiprocess: whether another process may run the app at the same time
      @engine = Engine.new(@server.listeners.fds, @config.engine_options.merge(multiprocess: @config[:workers] > 1,
                                                                                started_ms: (@server.started_at.to_f * 1000).to_i,
                                                                                proxy_protocols: @server.listeners.proxy_protocols,
                                                                                tls_contexts: @server.listeners.tls_contexts))
      # The engine marks its row busy/idle itself: no Ruby call per request.
      @engine.attach_scoreboard(@scoreboard, @sb_row) if @scoreboard
      @access_log = AccessLog.new(@config[:access_log], @config[:access_log_format], @config[:trusted_proxies]) if @config[:access_log]
      trap_signals
      replay_early_signals
      watch_master if self.class.lifeline
      @server.write_pid_file if @standalone
      start_soft_timeout if @soft
      @config.hook(:after_worker_boot, @server, @index)
      # After the hook: a depth limit the app set there is carried over.
      QueryParser.install if @config[:fast_query_parser]
      title
      @ready&.write("#{@index} #{Process.pid}\n") # kept open: #retire reports on it too
      if @standalone # no master: this process tells systemd it lives
        Systemd.notify("READY=1\nMAINPID=#{Process.pid}")
        Systemd.feed_watchdog
      end
      if @fibers then dispatch_fibers
      elsif @threads > 1 then dispatch
      else serve_each
      end
    ensure
      @config.hook(:before_worker_exit, @server, @index) if @engine
      @engine&.close
    end

    # Graceful: no new connections, in-flight requests finish. Connections
    # the kernel already queued on the listeners count as in flight: they
    # are accepted and served first — unless a supervisor
    # (start_server, systemd) holds the listeners for the next generation,
    # which will serve them.
    def stop(drain_backlog: @server.listeners.supervisor.nil?)
      return exit!(0) if @stopping && !@promoted # a second TERM: no more waiting

      @promoted = false # a stop while becoming the mold: just stop
      @stopping = true
      @engine.stop(drain_backlog && queued)
      @server.listeners.close_sockets
      end_streams
    end

    def promoted? = @promoted

    # A lone worker's TERM with shutdown_delay (ShutdownDelay; the master's
    # is Master#graceful_stop): serve that long, then drain. A second TERM
    # exits. The drain is the main thread's (the engine stops only from
    # there): once the delay is over a timer sends the signal again.
    def stop_after_delay(sig)
      @delay ||= ShutdownDelay.new(@config[:shutdown_delay])
      case @delay.stop(sig, Process.clock_gettime(Process::CLOCK_MONOTONIC))
      when :drain
        Log.info(@stopping ? "#{sig} again: exiting at once" : "#{sig}: draining")
        stop
      when :again then exit!(0)
      when :wait
        Log.info("#{sig}: serving #{@delay.seconds} s more (shutdown_delay), then draining")
        Log.thread("shutdown_delay") do
          sleep @delay.seconds # the delay itself
          Process.kill(sig, Process.pid)
        end
      end
    end

    # The life of a worker forked by the master or by a mold, once the block
    # has closed the parent's fds it must not keep: boot, serve,
    # become the next mold when promoted (GENERATION), exit without at_exit.
    def self.run_forked(server, app, index:, ready:, scoreboard:, row:, link:, generation:)
      yield
      Log.worker = index
      Privileges.drop(server.config[:user]) if server.config[:user]
      Process.setproctitle("oribi worker[#{index}] booting")
      server.config.hook(:after_fork, server, index)
      app ||= server.load_app
      worker = new(server, app, index: index, ready: ready, scoreboard: [scoreboard, row], link: link)
      worker.run
      Mold.new(server, app, link: link, ready: ready, scoreboard: scoreboard, generation: generation).run if worker.promoted?
      $stdout.flush # exit! skips at_exit and buffered output
      $stderr.flush
      exit!(0)
    rescue Exception => e # rubocop:disable Lint/RescueException
      Log.error("worker[#{index}] failed", e) unless e.is_a?(SystemExit)
      exit!(1)
    end

    private

    # The signals that came before trap_signals, sent again to its handlers.
    def replay_early_signals
      return unless @early

      @early.wait(0).uniq.each { |sig| Process.kill(sig, Process.pid) }
      @early.close
    end

    # How many connections wait on the listeners now: the backlog a drain
    # serves. Where the kernel does not say (macOS), a listener's backlog
    # limit: no more can be queued, and clients that keep connecting hold
    # the drain open for that many at most.
    def queued
      @server.listeners.all.sum { |l| Oribi.listen_queue(l.fileno)&.first || @config[:backlog] }
    end

    # A worker whose master died (kill -9, OOM killer) stops as for USR2:
    # it closes its listeners at once, so that the server started in its
    # place (or start_server's next generation) binds and serves, finishes
    # what it has in flight, and exits. Unsupervised it would serve old code
    # forever and hold the listeners.
    #
    # Between two looks it checks in (worker_timeout, as Puma's workers
    # do): a thread of its own, so a request that runs long, in Ruby or
    # waiting on I/O, never silences it; a process stopped or stuck in C
    # with the GVL held does fall silent, and the master kills it.
    def watch_master
      master = Process.ppid
      lifeline = self.class.lifeline
      every = check_in_interval
      Log.thread("master watch") do
        loop do
          @scoreboard&.check_in(@sb_row)
          # The master never writes: readable is EOF.
          break if lifeline.wait_readable(every) && lifeline.read_nonblock(1, exception: false).nil?
        end
        Log.info("worker[#{@index}] pid #{Process.pid}: the master (pid #{master}) is gone; draining and exiting")
        Process.kill(:USR2, Process.pid)
      end
    end

    # Often enough that a short worker_timeout is never missed by a live worker.
    def check_in_interval
      timeout = @config[:worker_timeout]
      timeout.positive? ? [1.0, timeout / 4.0].min : 1.0
    end

    # One thread: the loop and the app take turns on it, no pool, no queue.
    # The engine keeps the scoreboard and runs oob_gc itself (engine.c).
    def serve_each
      thread_started
      while (env = @engine.next_request)
        @served += 1
        retire if @limit && @served == @limit # before the response, so that it says connection: close
        @fiber_per_request ? Fiber.new { serve(env) }.resume : serve(env)
        title if (@served % TITLE_EVERY).zero?
      end
    end

    # Several threads: this (main) thread runs the loop, its trap handlers
    # and retire; the pool runs the app. The engine hands out a request only
    # when one of the threads is free, so the queue holds at most
    # the few a thread is about to take.
    def dispatch
      @queue = Thread::Queue.new
      @pool_lock = Mutex.new
      @pool = []
      @threads.times { app_thread }
      feed
    ensure # graceful drain: every thread finishes what it has
      @queue&.close
      # A stream that began meanwhile adds a thread (which finds the queue closed).
      while (live = @pool_lock.synchronize { @pool.select(&:alive?) }).any?
        live.each(&:join)
      end
    end

    # The loop's requests onto @queue for the threads (or the fiber
    # thread), until a stop has drained it
    def feed
      while (env = @engine.next_request)
        @served += 1
        retire if @limit && @served == @limit
        @queue << env
        title if (@served % TITLE_EVERY).zero?
      end
    end

    # fibers: this (main) thread runs the loop as with a pool; one thread
    # runs every request, each a fiber (Fibers).
    def dispatch_fibers
      @queue = Thread::Queue.new
      runner = Log.thread("fibers") do
        thread_started
        @fibers.run(@queue) { |env| serve(env) }
      end
      feed
    ensure
      @queue&.close
      runner&.join
    end

    # A thread of the pool; one more when a thread of it goes on with a
    # stream (#serve), which leaves the pool when the stream ends.
    def app_thread
      t = Log.thread("app", restart: true) do
        thread_started unless Thread.current[:oribi_started] # a restarted thread is the same app thread
        serve_queue(@queue)
      end
      @pool_lock.synchronize do
        @pool.select!(&:alive?)
        @pool << t
      end
    end

    # before_thread_start (Puma's too): an error in it is logged, and the
    # thread serves all the same, as in Puma.
    def thread_started
      Thread.current[:oribi_started] = true
      @config.hook(:before_thread_start, @server, @index)
    rescue StandardError => e
      Log.error("before_thread_start raised", e)
    end

    def serve_queue(queue)
      while (env = queue.pop)
        served = @fiber_per_request ? Fiber.new { serve(env) }.resume : serve(env)
        break if served == :streamed # another thread took this one's place
      end
    rescue RequestTimeout # soft_timeout_raise landing just after its request ended
      retry
    end

    def trap_signals
      if @link
        trap("URG") do
          next if @stopping

          @promoted = @stopping = true
          @engine.stop(false) # the other workers take the backlog; listeners stay open
          end_streams
        end
      end
      %w[TERM INT QUIT].each { |sig| trap(sig) { @standalone ? stop_after_delay(sig) : stop } }
      # from the master: others go on (or a next generation), leave the backlog
      trap("USR2") do
        said("USR2: draining and exiting, leaving the backlog (no master here to restart in place)")
        stop(drain_backlog: false)
      end
      trap("USR1") do
        Log.reopen(@config)
        @access_log&.reopen
        said("USR1: reopened the log files")
      end
    end

    # A lone server (workers 0) says what each signal does, as a master
    # does; a worker's signals come from its master, which said so.
    def said(line)
      Log.info(line) if @standalone
    end

    # A watchdog thread, only when soft_timeout is set: a request inside the
    # app for longer is logged once with where the app is (its thread's
    # backtrace), and with soft_timeout_raise interrupted by
    # Oribi::RequestTimeout, which the app sees like any exception (the
    # client gets a 500). Each app thread (under fibers, each request's
    # fiber) has its own record.
    def start_soft_timeout
      tick = [@soft / 4.0, 0.25].min
      Log.thread("soft_timeout", restart: true) do
        reported = {}.compare_by_identity # env => true, while it is in the app
        loop do
          sleep tick
          now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          live = @in_app.to_a
          live.each do |thread, (env, started)|
            running = now - started
            next if running < @soft || reported.key?(env)

            reported[env] = true
            Log.info("soft_timeout: #{env['REQUEST_METHOD']} #{env['REQUEST_URI']} running #{running.round(1)} s",
                     backtrace: (thread.backtrace || []).first(20))
            # A fiber (fibers) waits in the scheduler: nothing may raise into it from outside.
            next unless @config[:soft_timeout_raise] && thread.is_a?(Thread) && @in_app[thread]&.first.equal?(env)

            thread.raise(RequestTimeout, "request ran longer than soft_timeout (#{@soft} s)")
          end
          reported.keep_if { |env, _| live.any? { |_, (e, _)| e.equal?(env) } }
        end
      end
    end

    # lowlevel_error_handler's answer to the app's exception, called as Puma
    # calls it (by its arity: error, env, status); nil when there is none
    # or it failed too.
    def handled(error, env)
      return nil unless (h = @error_handler)

      res = case h.arity
            when 1 then h.call(error)
            when 2 then h.call(error, env)
            else h.call(error, env, 500)
            end
      status, headers, body = res
      [status, headers, body, error]
    rescue StandardError => e
      Log.error("#{env['REQUEST_METHOD']} #{env['REQUEST_URI']}: lowlevel_error_handler raised", e)
      nil
    end

    # max_requests, or a draw between min_requests and max_requests so that
    # workers started together do not all recycle at once.
    def request_limit
      max = @config[:max_requests]
      return nil if max.zero?

      min = @config[:min_requests]
      min.positive? ? rand(min..max) : max
    end

    # max_requests reached: the other workers go on, so the backlog is
    # theirs; the master, told at once, starts this one's replacement while
    # it drains (with one worker, the backlog waits for it).
    def retire
      Log.info("worker[#{@index}] served #{@served} requests (limit #{@limit}): recycling")
      begin
        @ready&.write("#{@index} #{Process.pid} recycling\n")
      rescue IOError, SystemCallError
        nil # the master is gone, or re-executed (USR2) and this worker is the previous image's
      end
      @stopping = true
      @engine.stop(false)
      @server.listeners.close_sockets
      end_streams
    end

    # A drain: open streams (Streams) get shutdown_timeout less a second,
    # then end, so that the worker ends them itself, exits cleanly and
    # loses nothing else; shutdown_timeout counts from the signal, a
    # shutdown_delay included.
    def end_streams
      grace = [@config[:shutdown_timeout] - @config[:shutdown_delay] - 1, 0].max
      @streams&.close_after(grace)
      @fibers&.end_after(grace)
    end

    def title
      Process.setproctitle("oribi worker[#{@index}] served=#{@served}")
    end

    # → :streamed when this (pool) thread went on with a stream and has
    # left the pool to another.
    def serve(env)
      started = Process.clock_gettime(Process::CLOCK_REALTIME) if @access_log
      status, headers, body, error = call_app(env)
      if @streams && Streams.body?(env, body) && (on = @engine.carry(env))
        return stream(on, env, status, headers, body, error, started)
      end

      respond(env, env, status, headers, body, error, started)
    end

    # The rest of a response the engine carries as a stream: on this thread
    # (its locals and its Rails executor state are the body's too), a new
    # one taking its place in the pool; a lone worker's only thread runs the
    # loop, so there a thread of its own writes the stream.
    def stream(on, env, status, headers, body, error, started)
      respond = -> { @streams.carry { respond(on, env, status, headers, body, error, started) } }
      return Log.thread("stream", &respond) && nil unless @queue

      app_thread
      respond.call
      :streamed
    end

    # on: the env, or the Exchange a stream goes on in (Engine#carry).
    def respond(on, env, status, headers, body, error, started)
      sent = @engine.respond(on, status, headers, body, error)
      @access_log&.log(env, sent && status, sent, Time.at(started)) # nil after a full hijack
    rescue SystemExit, SignalException, Streams::Closed
      raise
    rescue Exception => e # rubocop:disable Lint/RescueException
      raise if @fibers&.stop?(e) # a drain's grace ended it

      # The engine already answered (500 or a close) and closed the body.
      Log.error("#{env['REQUEST_METHOD']} #{env['REQUEST_URI']}: response failed", e)
    end

    # A response that is no Array is taken apart here, under the rescue: its
    # to_ary raising is the app's error, answered with a 500, and never
    # leaves its exchange without a respond. (An Array, the usual case, is
    # taken apart by the caller without a call and without a copy.)
    def call_app(env)
      # http_methods (Puma's supported_http_methods): what Puma answers 501 to
      return [501, ERROR_HEADERS.dup, NOT_IMPLEMENTED_BODY] if @methods && !@methods.key?(env[Rack::REQUEST_METHOD])

      @in_app[@fibers ? Fiber.current : Thread.current] = [env, Process.clock_gettime(Process::CLOCK_MONOTONIC)] if @soft
      res = @app.call(env)
      return res if res.instance_of?(Array)

      status, headers, body = res
      [status, headers, body, nil]
    rescue SystemExit, SignalException
      raise
    rescue Exception => e # rubocop:disable Lint/RescueException
      Log.error("#{env['REQUEST_METHOD']} #{env['REQUEST_URI']}: app raised", e)
      handled(e, env) || [500, ERROR_HEADERS.dup, ERROR_BODY, e] # e goes to rack.response_finished
    ensure
      @in_app.delete(@fibers ? Fiber.current : Thread.current) if @soft
    end
  end
end
