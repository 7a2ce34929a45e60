# frozen_string_literal: true

require "etc"

module Oribi
  # The server's options: one table with each option's default and the check
  # its value must pass, filled from (later wins) defaults, environment
  # variables, the config file (see DSL) and the command line.
  # docs/CONFIGURATION.md describes each option once.
  class Config
    class Error < StandardError; end

    Option = Struct.new(:name, :default, :check, :hint, keyword_init: true)

    POSITIVE = ->(v) { v.is_a?(Numeric) && v.positive? }
    COUNT = ->(v) { v.is_a?(Integer) && v >= 0 }
    AT_LEAST_ONE = ->(v) { v.is_a?(Integer) && v >= 1 }
    BOOL = ->(v) { v == true || v == false }
    STRING = ->(v) { v.is_a?(String) && !v.empty? }
    OPTIONAL_STRING = ->(v) { v.nil? || STRING.call(v) }
    HOOK = ->(v) { v.nil? || v.respond_to?(:call) }
    MODE = ->(v) { v.nil? || (v.is_a?(Integer) && v.between?(0, 0o777)) }

    # Integer from an environment variable, or a clear error naming it.
    def self.env_int(name, fallback)
      v = ENV[name]
      return fallback if v.nil? || v.empty?

      Integer(v, 10)
    rescue ArgumentError
      raise Error, "#{name}=#{v.inspect} is not an integer"
    end

    OPTIONS = [
      Option.new(name: :binds, default: -> { ["tcp://0.0.0.0:#{Config.env_int('PORT', 9292)}"] },
                 check: ->(v) { v.is_a?(Array) && !v.empty? && v.all?(String) }, hint: "a list of URIs"),
      Option.new(name: :workers, default: -> { Config.env_int("WEB_CONCURRENCY", Etc.nprocessors) },
                 check: COUNT, hint: "an integer >= 0"),
      Option.new(name: :threads, default: -> { Config.env_int("ORIBI_THREADS", 1) },
                 check: ->(v) { v.is_a?(Integer) && v.between?(1, 1024) }, hint: "an integer 1..1024"),
      Option.new(name: :environment, default: -> { ENV["RACK_ENV"] || "development" }, check: STRING),
      Option.new(name: :rackup, default: "config.ru", check: STRING),
      Option.new(name: :config_file, default: nil, check: OPTIONAL_STRING),
      Option.new(name: :preload_app, default: true, check: BOOL),
      Option.new(name: :backlog, default: 1024, check: AT_LEAST_ONE),
      Option.new(name: :reuse_port, default: false, check: BOOL),
      Option.new(name: :unix_mode, default: 0o660, check: MODE, hint: "nil or a mode like 0o660"),
      Option.new(name: :umask, default: nil, check: MODE, hint: "nil or a mode like 0o027"),
      Option.new(name: :keepalive, default: true, check: BOOL),
      Option.new(name: :keepalive_timeout, default: 20, check: POSITIVE),
      Option.new(name: :keepalive_requests, default: 1000, check: COUNT),
      Option.new(name: :header_timeout, default: 30, check: POSITIVE),
      Option.new(name: :body_timeout, default: 30, check: POSITIVE),
      Option.new(name: :write_timeout, default: 30, check: POSITIVE),
      Option.new(name: :max_body, default: 0, check: COUNT),
      Option.new(name: :body_buffer, default: 112 * 1024, check: COUNT),
      Option.new(name: :max_request_line, default: 8192, check: ->(v) { v.is_a?(Integer) && v >= 16 }),
      Option.new(name: :max_header_bytes, default: 65_536, check: ->(v) { v.is_a?(Integer) && v >= 16 }),
      Option.new(name: :max_headers, default: 100, check: AT_LEAST_ONE),
      Option.new(name: :max_connections, default: 1024, check: AT_LEAST_ONE),
      Option.new(name: :max_requests, default: 0, check: COUNT),
      Option.new(name: :min_requests, default: 0, check: COUNT),
      Option.new(name: :shutdown_timeout, default: 25, check: POSITIVE),
      Option.new(name: :worker_timeout, default: 60, check: ->(v) { v.is_a?(Numeric) && v >= 0 },
                 hint: "seconds, 0 = never"),
      Option.new(name: :soft_timeout, default: 0, check: ->(v) { v.is_a?(Numeric) && v >= 0 },
                 hint: "seconds, 0 = off"),
      Option.new(name: :soft_timeout_raise, default: false, check: BOOL),
      Option.new(name: :rolling_interval, default: 1, check: ->(v) { v.is_a?(Numeric) && v >= 0 }),
      Option.new(name: :refork_after, default: [].freeze,
                 check: ->(v) { v.is_a?(Array) && v.all? { |n| n.is_a?(Integer) && n.positive? } },
                 hint: "a list of request counts, [] = off"),
      Option.new(name: :oob_gc, default: 0, check: COUNT, hint: "requests between GCs, 0 = off"),
      Option.new(name: :control, default: nil,
                 check: ->(v) { v.nil? || (v.is_a?(String) && v.match?(%r{\A(unix:///.+|tcp://.+:\d+)\z})) },
                 hint: "nil, tcp://HOST:PORT or unix:///PATH"),
      Option.new(name: :control_token, default: -> { ENV["ORIBI_CONTROL_TOKEN"] }, check: OPTIONAL_STRING),
      Option.new(name: :tmpdir, default: -> { ENV["TMPDIR"] || "/tmp" }, check: STRING),
      Option.new(name: :access_log, default: nil, check: OPTIONAL_STRING),
      Option.new(name: :access_log_format, default: "combined",
                 check: ->(v) { %w[combined ltsv json].include?(v) }, hint: "combined, ltsv or json"),
      Option.new(name: :stdout_path, default: nil, check: OPTIONAL_STRING),
      Option.new(name: :stderr_path, default: nil, check: OPTIONAL_STRING),
      Option.new(name: :pid_file, default: nil, check: OPTIONAL_STRING),
      Option.new(name: :before_fork, default: nil, check: HOOK),
      Option.new(name: :after_fork, default: nil, check: HOOK),
      Option.new(name: :after_worker_boot, default: nil, check: HOOK),
      Option.new(name: :before_worker_exit, default: nil, check: HOOK),
    ].to_h { |o| [o.name, o] }.freeze

    HOOKS = %i[before_fork after_fork after_worker_boot before_worker_exit].freeze

    # Options the C engine reads (Engine.new), passed through as they are.
    ENGINE = %i[keepalive keepalive_timeout keepalive_requests header_timeout body_timeout
                write_timeout max_body body_buffer max_request_line max_header_bytes
                max_headers max_connections tmpdir oob_gc threads].freeze

    DEFAULT_FILE = "config/oribi.rb"

    # Builds the configuration the way the CLI does: the config file (the
    # given one, else config/oribi.rb when present), then cli on top.
    def self.load(cli = {})
      config = new
      file = cli[:config_file] || (DEFAULT_FILE if File.file?(DEFAULT_FILE))
      DSL.load(config, file) if file
      cli.each { |k, v| config[k] = v }
      config.check!
      config
    end

    def initialize(values = {})
      @values = {}
      values.each { |k, v| self[k] = v }
    end

    def [](name)
      opt = OPTIONS.fetch(name) { raise Error, "unknown option #{name}" }
      return @values[name] if @values.key?(name)

      @values[name] = opt.default.respond_to?(:call) ? opt.default.call : opt.default
    end

    def []=(name, value)
      opt = OPTIONS[name] or raise Error, "unknown option #{name}"
      unless opt.check.call(value)
        raise Error, "invalid value for #{name}: #{value.inspect}#{" (expected #{opt.hint})" if opt.hint}"
      end

      @values[name] = value
    end

    def set?(name) = @values.key?(name)

    # Checks across options, and the defaults taken from the environment.
    def check!
      OPTIONS.each_key { |k| self[k] }
      if self[:min_requests].positive? && self[:max_requests] < self[:min_requests]
        raise Error, "min_requests (#{self[:min_requests]}) is above max_requests (#{self[:max_requests]})"
      end

      self
    end

    def engine_options
      ENGINE.to_h { |k| [k, self[k]] }
    end

    # Runs a hook if configured; hooks get the server and a worker index.
    def hook(name, *args)
      h = self[name]
      h&.call(*args)
    end

    # The config file's language: every option is a method named after it,
    # `bind` adds one listener, hooks take a block.
    #
    #   workers 4
    #   bind "unix:///run/app.sock"
    #   after_fork { |server, worker| DB.reconnect }
    # (An Object, not a BasicObject: config files call File, ENV, Etc.)
    class DSL
      def self.load(config, path)
        raise Error, "config file #{path} not found" unless File.file?(path)

        dsl = new(config, path)
        dsl.instance_eval(File.read(path), path, 1)
        dsl.__finish
      rescue Error => e
        raise Error, "#{path}:#{error_line(e, path)}#{e.message}"
      rescue SyntaxError, NameError, ArgumentError, TypeError => e
        raise Error, "#{path}:#{error_line(e, path)}#{e.message.lines.first.chomp}"
      end

      def self.error_line(error, path)
        line = error.backtrace_locations&.find { |l| l.path == path }&.lineno
        line ||= error.message[/#{Regexp.escape(path)}:(\d+)/, 1] if error.is_a?(SyntaxError)
        line ? "#{line}: " : " "
      end

      def initialize(config, path)
        @config = config
        @path = path
        @binds = []
      end

      def bind(uri)
        @binds << uri
      end

      OPTIONS.each_key do |name|
        next if name == :binds || name == :config_file

        if HOOKS.include?(name)
          define_method(name) { |&blk| @config[name] = blk }
        else
          define_method(name) { |value| @config[name] = value }
        end
      end

      def method_missing(name, *args)
        return super if name.start_with?("to_") # conversions probed by Ruby itself

        raise Error, "unknown option `#{name}'"
      end

      def respond_to_missing?(*) = false

      def __finish
        @config[:binds] = @binds unless @binds.empty?
      end
    end
  end
end
