# frozen_string_literal: true

require "rack"

module Oribi
  # The process manager: binds the listeners, loads the app, and either
  # serves in this process (workers 0 or 1) or forks workers and keeps them
  # running until told to stop.
  class Server
    def initialize(config)
      @config = config
      @workers = {} # pid => index
      @stopping = false
    end

    # Serves app, or the app of the rackup file when none is given; returns
    # the exit status.
    def run(app = nil)
      ENV["RACK_ENV"] = @config[:environment]
      @listeners = Listeners.new(@config[:binds], backlog: @config[:backlog])
      app ||= load_app
      banner
      if @config[:workers] <= 1
        Worker.new(app, @listeners, @config).run
      else
        run_master(app)
      end
      0
    ensure
      @listeners&.close
    end

    def load_app
      path = @config[:rackup]
      raise Config::Error, "no rackup file #{path}" unless File.file?(path)

      app = Rack::Builder.parse_file(path)
      app.is_a?(Array) ? app.first : app # Rack 2 returned [app, options]
    end

    private

    def banner
      Log.info("Oribi #{VERSION} (Ruby #{RUBY_VERSION}, rack #{Rack.release}) pid #{Process.pid}, " \
               "#{@config[:workers]} worker(s), env #{@config[:environment]}")
      @listeners.all.each { |l| Log.info("listening on #{l}") }
    end

    def run_master(app)
      @self_r, @self_w = IO.pipe
      @signals = []
      %w[TERM INT QUIT CHLD].each do |sig|
        trap(sig) do
          @signals << sig
          @self_w.write_nonblock(".", exception: false)
        end
      end
      @app = app
      @config[:workers].times { |i| spawn_worker(i) }
      master_loop
    end

    def spawn_worker(index)
      pid = fork do
        @self_r.close
        @self_w.close
        %w[TERM INT QUIT CHLD].each { |sig| trap(sig, "DEFAULT") }
        Process.setproctitle("oribi worker[#{index}]")
        Worker.new(@app, @listeners, @config, index: index).run
        exit!(0)
      end
      @workers[pid] = index
    end

    def master_loop
      Process.setproctitle("oribi master")
      deadline = nil
      loop do
        reap
        break if @stopping && @workers.empty?

        timeout = deadline ? [deadline - now, 0].max : nil
        @self_r.wait_readable(timeout)
        @self_r.read_nonblock(64, exception: false)
        while (sig = @signals.shift)
          next if sig == "CHLD"

          if @stopping # a second TERM: no more waiting
            kill_workers(:KILL)
          else
            @stopping = true
            deadline = now + @config[:shutdown_timeout]
            kill_workers(:TERM)
          end
        end
        if deadline && now >= deadline && !@workers.empty?
          Log.error("workers still running after shutdown_timeout: killing #{@workers.keys.join(', ')}")
          kill_workers(:KILL)
          deadline = now + 5
        end
      end
    end

    def reap
      while (pid, status = Process.wait2(-1, Process::WNOHANG))
        index = @workers.delete(pid)
        next unless index

        unless @stopping
          Log.error("worker[#{index}] pid #{pid} exited (#{status}); starting a new one")
          spawn_worker(index)
        end
      end
    rescue Errno::ECHILD
      nil
    end

    def kill_workers(sig)
      @workers.each_key do |pid|
        Process.kill(sig, pid)
      rescue Errno::ESRCH
        nil
      end
    end

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end
