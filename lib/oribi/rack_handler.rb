# frozen_string_literal: true

require "socket"
require "oribi"

module Oribi
  # The Rack handler contract, which is how frameworks start a server by
  # name: `rackup -s oribi`, Sinatra's `set :server, :oribi`, `rails server
  # -u oribi`. lib/rackup/handler/oribi.rb (rackup, for Rack 3) and
  # lib/rack/handler/oribi.rb (Rack 2) each extend a module with this one.
  #
  # Options come in one hash that mixes the caller's own settings (rackup's
  # :config, :pid, :daemonize; Rails' :caching) with server options, which by
  # convention are CamelCase (:Host, :Port, and `-O Name=value`). So only
  # CamelCase keys are read here: a future Oribi option named like one of
  # rackup's (say `pid`) cannot be set by accident.
  module RackHandler
    # Config options a handler does not take: the app is already built, the
    # listeners come from Host/Port or Bind, the environment from :environment.
    NOT_OPTIONS = %i[rackup binds environment].freeze

    # CamelCase keys that callers pass to every server, meant for WEBrick
    # (AccessLog, DoNotReverseLookup): no warning for ignoring those.
    FOREIGN = %i[Host Port Bind AccessLog DoNotReverseLookup].freeze

    # The listener options, which are no Config options: Host and Port as
    # every handler takes them, or Bind for Oribi's own list of URIs.
    LISTENERS = {
      "Host=HOST" => "address or name to listen on; a /path is a unix socket (default: 0.0.0.0)",
      "Port=PORT" => "TCP port (default: $PORT or #{Options::PORT})",
      "Bind=URI[,URI...]" => "tcp://HOST:PORT, tcp://[V6]:PORT or unix:///PATH; replaces Host and Port",
    }.freeze

    # `rails server`'s flags for the listener (Rails::Command::ServerCommand).
    RAILS_LISTENER_FLAGS = %w[-p --port -b --binding].freeze

    # What `rackup -s oribi -h` shows: the listener options, then every
    # other option of the table under its CamelCase name.
    def valid_options
      LISTENERS.merge(settable.to_h { |camel, opt| ["#{camel}=#{opt.arg}", opt.help_line] })
    end

    # Serves app until TERM/INT/QUIT (or #shutdown); returns the exit status.
    # A block gets the Launcher before the listeners are bound: Sinatra keeps
    # it to call #stop when it quits.
    def run(app, **options)
      @launcher = Launcher.new(config(options))
      yield @launcher if block_given?
      @launcher.run(app)
    end

    # rackup's INT trap calls this (until Oribi's own traps replace it);
    # Sinatra stops through the Launcher instead.
    def shutdown
      @launcher&.stop
    end

    # The Oribi::Config that options describe (public so it can be checked
    # without starting a server), on top of the config file (-O ConfigFile=,
    # else Config.default_file: config/oribi.rb, else the app's Puma config,
    # which Puma's handler would read). What the user typed wins over the file; the caller's
    # own defaults (rails server always passes Host, Port and environment)
    # only fill what the file leaves unset. user_supplied_options, from
    # Rails, says which is which; without it all count as typed. For the
    # listeners see #typed_listener. Raises Config::Error for a bad value.
    def config(options)
      typed = options[:user_supplied_options]
      given = ->(*keys) { typed.nil? || keys.any? { |k| typed.include?(k) } }
      strong = server_options(options)
      weak = {}
      binds = binds(options)
      why = typed_listener(options) if binds
      (why ? strong : weak)[:binds] = binds if binds
      (given.call(:environment) ? strong : weak)[:environment] = options[:environment].to_s if options[:environment]
      # Rails' command line again (`bin/rails server … --restart`): what a
      # hot restart (bin/rails restart, USR2) runs, as Puma does.
      weak[:restart_command] = options[:restart_cmd].to_s if options[:restart_cmd]
      build(strong, weak, why)
    end

    private

    # Why the caller's Host/Port/Bind count as typed, or nil when they are
    # the caller's defaults, which a bind in the config file outranks.
    # Rails lists :Port among user_supplied_options whenever $PORT is set,
    # and :Host for $BINDING or $HOST: a front proxy sets PORT (Thruster,
    # Heroku's router), and then Rails' default host, 0.0.0.0 in production,
    # came with it. So under Rails only -p/-b typed on the command line
    # count, read from the command line it hands over for restarts
    # (restart_cmd: `bin/rails server ARGS --restart`).
    def typed_listener(options)
      typed = options[:user_supplied_options]
      if typed.nil?
        "#{listener_words(options)} came from a caller that does not say what was typed, so count as typed"
      elsif !typed.intersect?(%i[Host Port Bind])
        nil
      elsif options[:restart_cmd].is_a?(String)
        flags = rails_listener_flags(options[:restart_cmd])
        "#{flags.join(' ')} #{flags.size > 1 ? 'were' : 'was'} typed on the command line" unless flags.empty?
      else
        given = options.slice(:Bind, :Host, :Port).select { |k, _| typed.include?(k) }
        "#{listener_words(given)} #{given.size > 1 ? 'were' : 'was'} typed"
      end
    end

    def listener_words(options) = options.slice(:Bind, :Host, :Port).map { |k, v| "#{k} #{v}" }.join(", ")

    # ["-b 127.0.0.1", "--port=3000"] from "bin/rails server -b 127.0.0.1 --port=3000 --restart"
    def rails_listener_flags(command)
      words = command.to_s.split
      words.each_with_index.filter_map do |word, i|
        name, value = word.start_with?("--") ? word.split("=", 2) : [word[0, 2], word[2..]]
        next unless RAILS_LISTENER_FLAGS.include?(name)

        value.nil? || value.empty? ? [word, words[i + 1]].compact.join(" ") : word
      end
    end

    # The CamelCase options (-O Name=value), as Config values.
    def server_options(options)
      opts = settable
      options.each_with_object({}) do |(key, value), values|
        next unless key.is_a?(Symbol) && key.match?(/\A[A-Z]/)

        # WEBrick's AccessLog is an Array of loggers; Oribi's is a path.
        if (opt = opts[key.to_s]) && !(FOREIGN.include?(key) && value.is_a?(Array))
          values[opt.name] = opt.type.parse_text(value)
        elsif !FOREIGN.include?(key)
          Log.info("ignoring unknown server option #{key} (`rackup -s oribi -h` lists them)")
        end
      end
    end

    def build(strong, weak, why)
      config = Config.new
      environment = strong[:environment] || weak[:environment] || Options::ALL[:environment].value
      file = strong[:config_file] || Config.default_file(environment)
      Config.read(config, file) if file
      if strong[:binds] && config.set?(:binds) && config[:binds] != strong[:binds]
        Log.info("listening on #{strong[:binds].join(', ')} in place of #{file}'s bind #{config[:binds].join(', ')}: #{why}")
      end
      weak.each { |k, v| config[k] = v unless config.set?(k) }
      strong.each { |k, v| config[k] = v }
      # bin/rails restart touches it, as for Puma's tmp_restart
      config[:restart_file] = "tmp/restart.txt" if defined?(::Rails::Server) && !config.set?(:restart_file)
      config
    end

    # "KeepaliveTimeout" => the keepalive_timeout Option, for every option
    # -O can set. Values from the command line (`-O Workers=2`) arrive as
    # strings, which the option's type reads; the Config checks the result,
    # so a wrong one is reported, not guessed at.
    def settable
      Options::ALL.values.reject { |o| NOT_OPTIONS.include?(o.name) }.to_h do |opt|
        [opt.name.to_s.split("_").map(&:capitalize).join, opt]
      end
    end

    # nil (the Config default) when the caller names no listener. rackup and
    # Rails always pass Host and Port, their defaults included.
    def binds(options)
      if (bind = options[:Bind])
        return Array(bind).flat_map { |b| b.to_s.split(",") }.map(&:strip).reject(&:empty?)
      end

      host = options[:Host]&.to_s
      return nil if host.nil? && options[:Port].nil?
      return [host] if host&.match?(%r{\A(?:tcp|unix)://})
      return ["unix://#{host}"] if host&.start_with?("/")

      port = Integer((options[:Port] || ENV.fetch("PORT", Options::PORT)).to_s, 10, exception: false)
      raise Config::Error, "invalid port #{options[:Port].inspect}" unless port&.between?(0, 65_535)

      tcp_binds(host.nil? || host.empty? ? "0.0.0.0" : host, port)
    end

    # A name listens on every address it resolves to that this machine has:
    # "localhost" (rackup's, Sinatra's and Rails' development default) is
    # 127.0.0.1 and, where the resolver says so and IPv6 is up, ::1, as
    # browsers expect. With port 0 each listener would get a different port,
    # so only one.
    def tcp_binds(host, port)
      host = host.delete("[]")
      # Both loopbacks (Listeners) even where the resolver gives one, as Puma.
      return ["tcp://localhost:#{port}"] if host == "localhost" && port.positive?

      addrs = begin
        Addrinfo.getaddrinfo(host, port, nil, :STREAM).uniq(&:ip_address)
      rescue SocketError
        return ["tcp://#{host}:#{port}"] # Listeners reports the failure with the URI
      end
      local = Socket.ip_address_list.map(&:ip_address) + ["0.0.0.0", "::"]
      usable = addrs.select { |a| local.include?(a.ip_address) }
      addrs = usable unless usable.empty? # none: let bind(2) say why
      addrs = addrs.first(1) if port.zero?
      addrs.map { |a| a.ipv6? ? "tcp://[#{a.ip_address}]:#{port}" : "tcp://#{a.ip_address}:#{port}" }
    end

    # What a handler's block receives, as WEBrick's and Puma's handlers pass
    # their server: something to stop. Oribi::Server has no stop method; its
    # signal traps are the way in, and TERM to the process that runs it
    # drains in-flight requests whether that is a lone worker or the master
    # (a worker's app code calling #stop stops them all).
    class Launcher
      attr_reader :config, :server

      def initialize(config)
        @config = config
        @server = Server.new(config)
        @state = :new
      end

      def run(app)
        return 0 if @state == :stopped # stopped from the handler's block

        @pid = Process.pid
        @state = :running
        @server.run(app)
      ensure
        @state = :stopped
      end

      # Idempotent: Sinatra calls it again (at_exit, ensure) after the
      # server has returned.
      def stop
        case @state
        when :new then @state = :stopped
        when :running then Process.kill(:TERM, @pid)
        end
        nil
      rescue Errno::ESRCH
        nil
      end

      alias shutdown stop
    end
  end
end
