# frozen_string_literal: true

require "optparse"
require "oribi/options"

module Oribi
  # A tool's options (`oribi bench`, `oribi bench report`, `oribi tune`):
  # rows of the server's own Oribi::Options::Option (one struct for every
  # option Oribi has), each with its flags, type, a line of help and its
  # default. From such a table come the tool's command line (its --help
  # says every default there is), the values a run starts from, and what
  # the tool's doc must say: test/tool_docs_test.rb holds docs/BENCH.md and
  # docs/TUNE.md to the tables. The options more than one tool takes are
  # written once, below (the methods after "Shared"), and each table takes
  # its rows from there.
  class ToolOptions
    Type = Options::Type

    # What a tool's values are read as, beside the server's STR, INT, BOOL
    # and one_of. A TIME's text is checked by Bench.seconds, a UsageError
    # for both tools.
    TIME = Type.new(arg: "TIME", cli: ->(s) { Bench.seconds(s) }, show: ->(v) { format("%gs", v) })
    # Each flag adds to the list of those before it.
    EACH = Type.new(arg: "ITEM", cli: ->(s) { [s] }, repeat: true, show: ->(v) { v.empty? ? "none" : v.join(",") })

    include Enumerable

    def initialize(&table)
      @options = {}
      instance_eval(&table)
    end

    # option(:connections, "-c", "--connections N", "help", type: INT, default: 10) { |values, value| ... }:
    # a block stores the value itself, where values[name] = value would not do.
    def option(name, *flags, help, type: Options::STR, default: nil, &set)
      raise ArgumentError, "#{name}: written twice" if @options.key?(name)

      @options[name] = Options::Option.new(name, flags, type, default, nil, help, set)
    end

    def each(&) = @options.each_value(&)
    def [](name) = @options.fetch(name)
    def keys = @options.keys

    # What help and doc say of o's default: nothing when it has none, a
    # flag that is off unless given (an unset the table names, such as
    # "none" or "checked", is said).
    def self.shown(o) = o.default.nil? ? nil : o.shown

    def self.help_line(o) = shown(o) ? o.help_line : o.help

    # The values before any flag: every option with a default.
    def defaults = filter_map { |o| (v = o.value).nil? ? nil : [o.name, v] }.to_h

    # Adds every option to parser, storing into values as the server's
    # command line does (lib/oribi/cli.rb); given collects the names of
    # the flags given.
    def define(parser, values, given = [])
      each do |o|
        parser.on(*o.flags, *[o.type.pattern].compact, ToolOptions.help_line(o)) do |x|
          given << o.name
          x = o.type.parse_cli(x)
          if o.set then o.set.call(values, x)
          elsif o.type.repeat then values[o.name] = values.fetch(o.name, []) + x
          else values[o.name] = x
          end
        end
      end
      parser
    end

    # Shared: the options of both tools, or of a run and `oribi bench
    # report`, each written here once.

    # -H is added to every request, those of --targets too.
    def headers
      option :headers, "-H", "--header 'NAME: VALUE'", "request header; repeatable, and on every target too",
             type: EACH, default: [].freeze
    end

    # Where the requests go stays each tool's (bench: the URL's host or
    # --unix-socket; tune: its server): a target's URL names the request.
    def targets
      option :targets, "--targets FILE", "requests from FILE (vegeta's http format), sent in turn, instead of one"
    end

    # The report on stdout; what each command can render differs (only
    # `oribi bench report` has hlog), so formats are the caller's.
    def report_format(formats)
      option :format, "--format FORMAT", "report on stdout: #{formats.join(', ')}", type: Options.one_of(*formats),
                                                                                   default: "text"
      option(:json, "--json", "same as --format json", type: Options::BOOL) { |v, _| v[:format] = "json" }
    end

    # -d and --warmup are read alike in both tools, but time different
    # things: bench's -d is the whole run and its --warmup an optional
    # lead-in (none by default: a run measures from its first request, as
    # wrk and vegeta do); tune's -d is each of up to --steps probes per
    # setting, and its --warmup follows every boot of a cold server (so
    # it always has one) and also sets each capacity run's length. Hence
    # each tool gives its own help and default.
    def duration(help, default:) = option(:duration, "-d", "--duration TIME", help, type: TIME, default: default)
    def warmup(help, default:) = option(:warmup, "--warmup TIME", help, type: TIME, default: default)
  end
end
