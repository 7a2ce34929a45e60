# frozen_string_literal: true

require "oribi/options"
require "oribi/puma_words"

module Oribi
  # The server's options (their table: Options), filled from (later wins)
  # defaults, environment variables, the config file (see DSL) and the
  # command line, each value checked as it is set.
  class Config
    class Error < StandardError; end

    OPTIONS = Options::ALL

    # Integer from an environment variable, or a clear error naming it.
    def self.env_int(name, fallback)
      v = ENV[name]
      return fallback if v.nil? || v.empty?

      Integer(v, 10)
    rescue ArgumentError
      raise Error, "#{name}=#{v.inspect} is not an integer"
    end

    HOOKS = OPTIONS.values.select(&:hook?).map(&:name).freeze

    # Options the C engine reads (its own list, Engine::OPTIONS): Engine.new
    # takes each from this hash, with no fallback of its own.
    ENGINE = Engine::OPTIONS

    DEFAULT_FILE = "config/oribi.rb"

    # The file read when none is named: config/oribi.rb, else the Puma
    # config Puma itself would read there, so that an app moved from Puma
    # runs with its own under every command that starts the server.
    def self.default_file(environment = OPTIONS[:environment].value)
      [DEFAULT_FILE, *PumaWords.default_files(environment)].find { |f| File.file?(f) }
    end

    # Reads path into config in its language: Puma's (PumaWords) for a
    # Puma config, else Oribi's. The banner names it.
    def self.read(config, path, report: nil)
      (PumaWords.file?(path) ? PumaDSL : DSL).load(config, path, report: report)
      config[:config_file] = path
    end

    # Builds the configuration the way the CLI does: the config file (the
    # given one, else default_file), then cli on top.
    def self.load(cli = {})
      config = new
      file = cli[:config_file] || default_file(cli[:environment] || OPTIONS[:environment].value)
      read(config, file) if file
      cli.each { |k, v| config[k] = v }
      config.check!
      config
    end

    # The PEM text of TLS listeners' certificates and keys, by bind URI,
    # given in the config (Puma's ssl_bind cert_pem:, key_pem:), never on a
    # URI that logs and `ps` show.
    attr_reader :tls_pems

    def initialize(values = {})
      @values = {}
      @tls_pems = {}
      @defaulted = {} # names whose value is the option's default
      values.each { |k, v| self[k] = v }
    end

    def [](name)
      opt = OPTIONS.fetch(name) { raise Error, "unknown option #{name}" }
      return @values[name] if @values.key?(name)

      @defaulted[name] = true
      @values[name] = opt.value
    end

    def []=(name, value)
      opt = OPTIONS[name] or raise Error, "unknown option #{name}"
      unless opt.valid?(value)
        raise Error, "invalid value for #{name}: #{value.inspect}#{" (expected #{opt.hint})" if opt.hint}"
      end

      @defaulted.delete(name)
      @values[name] = value
    end

    def set?(name) = @values.key?(name)

    # Whether the values came from a Puma config: Puma's signals then.
    def puma? = !self[:config_file].nil? && PumaWords.file?(self[:config_file])

    # Whether name's value is its default (nothing set it).
    def default?(name)
      self[name]
      @defaulted.key?(name)
    end

    # Checks across options, and the defaults taken from the environment.
    def check!
      OPTIONS.each_key { |k| self[k] }
      if self[:user] && self[:workers].zero?
        raise Error, "user #{self[:user]} is for workers: it needs workers 1 or more"
      end
      if self[:shutdown_delay] >= self[:shutdown_timeout]
        raise Error, "shutdown_delay (#{self[:shutdown_delay]}) must be below shutdown_timeout " \
                     "(#{self[:shutdown_timeout]}), which counts from TERM and leaves the rest to drain"
      end
      if self[:threads] + self[:io_threads] > Engine::MAX_THREADS
        raise Error, "threads (#{self[:threads]}) and io_threads (#{self[:io_threads]}) make more than " \
                     "#{Engine::MAX_THREADS} threads per worker"
      end
      Fibers.load! if self[:fibers].positive? # a missing gem stops the boot, not a worker
      if self[:min_requests].positive? && self[:max_requests] < self[:min_requests]
        raise Error, "min_requests (#{self[:min_requests]}) is above max_requests (#{self[:max_requests]})"
      end
      # Whoever reaches a TCP port could stop the server: never without a token.
      if self[:control] && control_kind == :tcp && self[:control_token].nil?
        raise Error, "control #{self[:control]} is TCP: set control_token (or ORIBI_CONTROL_TOKEN) too"
      end
      if self[:refork_after].any? && Oribi.respond_to?(:child_subreaper?) && !Oribi.child_subreaper?
        raise Error, "refork_after needs a child subreaper, which this platform lacks (Linux and FreeBSD have one)"
      end

      self
    end

    def control_kind
      Listeners.parse(self[:control]).first
    rescue ArgumentError => e
      raise Error, "control: #{e.message}"
    end

    def engine_options
      ENGINE.to_h { |k| [k, self[k]] }.merge(trusted_networks: trusted_networks)
    end

    # trusted_proxies as [packed address, prefix bits] for the engine
    def trusted_networks
      self[:trusted_proxies].map { |a| IPAddr.new(a).then { |ip| [ip.hton, ip.prefix] } }
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
    # A Puma config is read in Puma's language (PumaDSL).
    class DSL
      # report: an Array that gets [kind, word, what] for each word read
      # (`oribi --check-config`); the ignored ones are then not logged.
      def self.load(config, path, report: nil)
        raise Error, "config file #{path} not found" unless File.file?(path)

        dsl = new(config, path, report)
        dsl.__start
        dsl.instance_eval(File.read(path), path, 1)
        dsl.__finish
      rescue Error => e
        raise Error, "#{path}:#{error_line(e, path)}#{e.message}"
      rescue ScriptError, StandardError => e # the file's own code failed (ENV.fetch's KeyError): one line too
        raise Error, "#{path}:#{error_line(e, path)}#{e.message.lines.first.chomp}"
      end

      def self.error_line(error, path)
        line = error.backtrace_locations&.find { |l| l.path == path }&.lineno
        line ||= error.message[/#{Regexp.escape(path)}:(\d+)/, 1] if error.is_a?(SyntaxError)
        line ? "#{line}: " : " "
      end

      def initialize(config, path, report = nil)
        @config = config
        @path = path
        @binds = []
        @report = report
      end

      def bind(uri)
        @binds << uri
      end

      OPTIONS.each_key do |name|
        next if name == :binds || name == :config_file

        if HOOKS.include?(name)
          define_method(name) { |&blk| __set(name, blk, name.to_s) }
        else
          define_method(name) { |value| __set(name, value, name.to_s) }
        end
      end

      # A value as the option's type reads text: `workers
      # ENV.fetch("WEB_CONCURRENCY") { 2 }` gives "3", which is 3, as in Puma.
      # The report says it as the type writes it (a mode in octal).
      def __set(name, value, word = nil)
        type = OPTIONS.fetch(name).type
        @config[name] = type.parse_text(value)
        return unless word

        v = @config[name]
        shown = type.show && !v.nil? && !value.respond_to?(:call) && (type.check.nil? || type.check.call(v)) ? type.show.call(v) : value.inspect
        @report&.push([:oribi, HOOKS.include?(name) ? word : "#{word} #{shown}", nil])
      end

      # A Puma word that sets an Oribi option.
      def __map(word, name, value)
        shown = value.respond_to?(:call) ? "{ block }" : value.inspect
        word = "#{word} #{shown}" unless word.include?(" ") || value.respond_to?(:call) || name == :binds
        @report&.push([:maps, word, name == :binds ? "bind #{shown}" : "#{name} #{shown}"])
        @config[name] = OPTIONS.fetch(name).type.parse_text(value) unless name == :binds
      end

      # A Puma word Oribi does not act on: one line says so, and why.
      def __ignored(word, args, why)
        shown = args.map(&:inspect).join(", ")
        text = "#{word}#{" #{shown}" unless shown.empty?}"
        return @report.push([:ignored, text, why]) if @report

        Log.info("#{@path}: #{text} is Puma's, ignored: #{why}")
      end

      def __differs(word, how)
        return @report.push([:differs, word, how]) if @report

        Log.info("#{@path}: #{word}: #{how}")
      end

      def method_missing(name, *args)
        return super if name.start_with?("to_") # conversions probed by Ruby itself
        if PumaWords.word?(name)
          raise Error, "`#{name}' is Puma's: Oribi reads Puma's words in a Puma config (#{PumaWords::FILES}), " \
                       "not in #{File.basename(@path)} (docs/MIGRATING.md)"
        end

        raise Error, "unknown option `#{name}'"
      end

      def respond_to_missing?(*) = false

      def __start; end

      def __finish
        @config[:binds] = @binds unless @binds.empty?
      end
    end

    # A Puma config's language: Puma's words, meaning what they mean in
    # Puma, and Oribi's options for the words Puma does not have.
    class PumaDSL < DSL
      prepend PumaWords
    end
  end
end
