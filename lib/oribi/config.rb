# frozen_string_literal: true

require "etc"

module Oribi
  # The server's options: one table with each option's default and the
  # check its value must pass. docs/CONFIGURATION.md describes each one.
  class Config
    class Error < StandardError; end

    Option = Struct.new(:name, :default, :check, keyword_init: true)

    POSITIVE = ->(v) { v.is_a?(Numeric) && v.positive? }
    COUNT = ->(v) { v.is_a?(Integer) && v >= 0 }
    BOOL = ->(v) { v == true || v == false }

    OPTIONS = [
      Option.new(name: :binds, default: -> { ["tcp://0.0.0.0:#{ENV.fetch('PORT', 9292)}"] },
                 check: ->(v) { v.is_a?(Array) && !v.empty? && v.all?(String) }),
      Option.new(name: :workers, default: -> { Integer(ENV.fetch("WEB_CONCURRENCY", Etc.nprocessors)) }, check: COUNT),
      Option.new(name: :environment, default: -> { ENV["RACK_ENV"] || "development" }, check: ->(v) { v.is_a?(String) }),
      Option.new(name: :rackup, default: "config.ru", check: ->(v) { v.is_a?(String) }),
      Option.new(name: :backlog, default: 1024, check: POSITIVE),
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
      Option.new(name: :max_headers, default: 100, check: ->(v) { v.is_a?(Integer) && v >= 1 }),
      Option.new(name: :max_connections, default: 1024, check: ->(v) { v.is_a?(Integer) && v >= 1 }),
      Option.new(name: :shutdown_timeout, default: 25, check: POSITIVE),
      Option.new(name: :tmpdir, default: -> { ENV["TMPDIR"] || "/tmp" }, check: ->(v) { v.is_a?(String) }),
    ].to_h { |o| [o.name, o] }.freeze

    # Options the C engine reads (Engine.new), passed through as they are.
    ENGINE = %i[keepalive keepalive_timeout keepalive_requests header_timeout body_timeout
                write_timeout max_body body_buffer max_request_line max_header_bytes
                max_headers max_connections tmpdir].freeze

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
      raise Error, "invalid value for #{name}: #{value.inspect}" unless opt.check.call(value)

      @values[name] = value
    end

    def set?(name) = @values.key?(name)

    def engine_options
      ENGINE.to_h { |k| [k, self[k]] }
    end
  end
end
