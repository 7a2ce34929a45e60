# frozen_string_literal: true

require "rack"
require "securerandom"
require_relative "fd_limit"
require "shellwords"

module Oribi
  # Sets the process up and picks its shape: binds the listeners, loads the
  # app (before forking when preload_app), and serves it from this process
  # (`workers 0`) or from a Master's forked workers.
  class Server
    attr_reader :config, :listeners, :launch, :control, :booted_in, :degraded, :started_at

    def initialize(config)
      @config = config
      # An X-Request-Start older than this is no queue time (engine.c)
      @started_at = Time.now
      # How to start this server again, for a hot restart (USR2): from
      # working_directory as named, so that a switched symlink (current/ ->
      # the new release) starts the release it names then; paths into the
      # release it resolves to now (booted_in) are re-pointed (Reexec).
      dir = File.expand_path(config[:working_directory])
      Dir.chdir(dir) unless File.identical?(dir, ".")
      @booted_in = Dir.pwd
      argv = if (cmd = config[:restart_command])
               Shellwords.split(cmd)
             else
               [RbConfig.ruby, File.expand_path($PROGRAM_NAME, dir), *ARGV]
             end
      @launch = [argv, dir]
    end

    # A new image (USR2) whose config or app failed to load: the workers
    # of the previous one go on serving; the next USR2 tries again.
    def self.degraded(error, launch_config = nil)
      Log.error("USR2: the new code failed to load; the previous workers go on serving", error)
      new(launch_config || Config.new).tap { |s| s.instance_variable_set(:@degraded, true) }
    end

    # Serves app, or the app of the rackup file when none is given; returns
    # the exit status.
    def run(app = nil)
      ENV["RACK_ENV"] = @config[:environment]
      # What the app and the server write goes out at once, to a terminal or
      # not (a file, a pipe, Docker's log, foreman): a line the app logged
      # is seen when it happened, not when a buffer fills or a worker exits.
      $stdout.sync = true
      $stderr.sync = true
      Log.reopen(@config)
      Log.setup(@config)
      File.umask(@config[:umask]) if @config[:umask]
      FdLimit.apply(@config)
      standalone = @config[:workers].zero?
      @control = open_control(standalone) # first: once the listeners accept, it answers too
      # Before the listeners: from the moment a client can connect, a TERM
      # (even while the app loads) is a graceful stop that serves it, never
      # the default death that resets the connections queued so far.
      signals = Signals.new(standalone ? Worker::SIGNALS : Master::SIGNALS)
      @listeners = Listeners.new(@config[:binds], backlog: @config[:backlog], reuse_port: @config[:reuse_port],
                                                  unix_mode: @config[:unix_mode], proxy_protocol: @config[:proxy_protocol],
                                                  tls_pems: @config.tls_pems)
      @listeners.apply_unix_mode unless @degraded # a config that did not load changes nothing
      app ||= load_app_or_degrade if @config[:preload_app] || standalone
      banner
      Oribi.eager_load!
      Systemd.stop_feeding # a hot restart's new image has loaded: the master's loop pings from here
      if standalone
        Worker.new(self, app, early: signals).run
        0
      else
        Master.new(self, app, signals).run
      end
    ensure
      @control&.close
      @listeners&.close
      remove_pid_file
    end

    def load_app_or_degrade
      return nil if @degraded

      load_app
    rescue Exception => e # rubocop:disable Lint/RescueException -- any error of the app's
      raise unless Reexec.adopting? && !e.is_a?(SignalException) && !e.is_a?(SystemExit)

      Log.error("USR2: the new code failed to load; the previous workers go on serving", e)
      @degraded = true
      nil
    end

    def load_app
      path = @config[:rackup]
      raise Config::Error, "no rackup file #{path}" unless File.file?(path)

      app = Rack::Builder.parse_file(path)
      app.is_a?(Array) ? app.first : app # Rack 2 returned [app, options]
    end

    # Called once the signal handlers are in place (a USR2 sent as soon as
    # the pid is readable must find them), by the master or the lone worker.
    # A USR2 re-exec keeps the pid: the file names the same process.
    def write_pid_file
      return unless (path = @config[:pid_file])

      # Renamed into place: a reader never sees a half-written file.
      tmp = create_pid_temp(path)
      File.rename(tmp, path)
      @pid_written = true
    end

    # The pid file's directory may be writable by others (/tmp, a shared
    # run dir): the temp file gets a name no one can guess and is created
    # new, never opened through a link planted there.
    def create_pid_temp(path)
      flags = File::WRONLY | File::CREAT | File::EXCL | File::NOFOLLOW
      3.times do
        tmp = "#{path}.#{Process.pid}.#{SecureRandom.hex(8)}"
        begin
          File.open(tmp, flags, 0o644) { |f| f.write("#{Process.pid}\n") }
          return tmp
        rescue Errno::EEXIST, Errno::ELOOP
          next
        end
      end
      raise Errno::EEXIST, "#{path}: no free temp name to write the pid file under"
    end

    private

    # Bound before the app loads, so that readiness probes get "booting"
    # (once the master runs) rather than a refused connection. The master
    # answers it: there is none with `workers 0`.
    def open_control(standalone)
      uri = @config[:control] or return nil
      raise Config::Error, "control needs a master: workers must be at least 1" if standalone

      fd = ENV.delete(Reexec::CONTROL)
      # Under start_server the previous generation still serves while this
      # one boots: it takes the endpoint over rather than fail on it.
      control = Control.new(uri, token: @config[:control_token], fd: (Integer(fd, 10) if fd),
                                 takeover: Listeners.inheritance&.first == :start_server)
      Log.info("control endpoint on #{uri}")
      control
    end

    # Only our own: after a USR2 handover the file holds the new master's pid.
    def remove_pid_file
      path = @config[:pid_file]
      File.unlink(path) if @pid_written && File.exist?(path) && File.read(path).to_i == Process.pid
    rescue SystemCallError
      nil
    end

    def banner
      n = @config[:workers]
      workers = n.zero? ? "single process" : "#{n} worker#{'s' if n > 1}#{workers_origin}"
      Log.info("Oribi #{VERSION} (Ruby #{RUBY_VERSION}, rack #{Rack.release}, #{Oribi::EVENT_LOOP}" \
               "#{", portable build" if Oribi::PORTABLE}), pid #{Process.pid}, " \
               "#{workers}, env #{@config[:environment]}#{', app preloaded' if @config[:preload_app]}" \
               "#{concurrency}, #{config_origin}")
      @listeners.all.each { |l| Log.info("listening on #{l}#{l.tls_text}#{l.access}") }
      handed = { systemd: "systemd (LISTEN_FDS)", start_server: "start_server (SERVER_STARTER_PORT)" }[@listeners.supervisor]
      return if handed.nil? || @config.default?(:binds)

      unused = @config[:binds] - @listeners.tls_binds_used.to_a
      return if unused.empty?

      Log.info("bind #{unused.join(', ')} not used: the listening sockets come from #{handed}")
    end

    # How a worker runs its requests, when not on one thread.
    def concurrency
      return ", up to #{@config[:fibers]} requests per worker as fibers (async #{Async::VERSION})" if @config[:fibers].positive?

      ", #{@config[:threads]} threads per worker" if @config[:threads] > 1
    end

    # Which file the values came from: a skipped one was silently missed.
    def config_origin
      file = @config[:config_file] or return "no config file"

      "config #{file}#{" (Puma's)" if @config.puma?}"
    end

    # Where a worker count nobody wrote down came from.
    def workers_origin
      return "" unless @config.default?(:workers)
      return " ($WEB_CONCURRENCY)" if ENV["WEB_CONCURRENCY"].to_s != ""

      " (one per usable CPU: #{Cgroup.current.cpus.why})"
    end
  end
end
