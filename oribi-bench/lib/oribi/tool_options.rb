# frozen_string_literal: true

require "optparse"

module Oribi
  # A tool's options (`oribi bench`, `oribi bench report`, `oribi tune`),
  # each written once: its flags, a line of help, its default and how that
  # default reads. From such a table come the tool's command line (its
  # --help says every default), the values a run starts from, and what the
  # tool's doc must say: test/tool_docs_test.rb holds docs/BENCH.md and
  # docs/TUNE.md to the tables. The server's options are Oribi::Options.
  class ToolOptions
    # flags: as OptionParser takes them ("-c", "--connections N", then
    # Integer, Float or a list of words); default: the value before any flag
    # (a Proc is called for it); shown: that default as help and doc say it
    # (nil: none is said); set: stores a flag's value, (values, value),
    # instead of values[key] = value.
    Option = Struct.new(:key, :flags, :help, :default, :shown, :set, keyword_init: true) do
      def help_line = shown ? "#{help} (default #{shown})" : help

      # How the doc's table names it: "-c, --connections N"
      def synopsis = flags.grep(String).join(", ")

      def default_value = default.respond_to?(:call) ? default.call : default
    end

    include Enumerable

    def initialize(&table)
      @options = {}
      instance_eval(&table)
    end

    def option(key, *flags, help, default: nil, shown: default_shown(default), &set)
      raise ArgumentError, "#{key}: written twice" if @options.key?(key)

      @options[key] = Option.new(key: key, flags: flags, help: help, default: default, shown: shown, set: set)
    end

    def each(&) = @options.each_value(&)
    def [](key) = @options.fetch(key)
    def keys = @options.keys

    # The values before any flag: every option with a default.
    def defaults = filter_map { |o| [o.key, o.default_value] unless o.default.nil? }.to_h

    # Adds every option to parser, storing into values; given collects the
    # keys of the flags given.
    def define(parser, values, given = [])
      each do |o|
        parser.on(*o.flags, o.help_line) do |x|
          given << o.key
          o.set ? o.set.call(values, x) : values[o.key] = x
        end
      end
      parser
    end

    private

    def default_shown(default)
      case default
      when nil, Proc, true, false then nil
      when Array then default.join(",")
      else default.to_s
      end
    end
  end
end
