# frozen_string_literal: true

require "rack"
require "rack/query_parser"
require "oribi"
require "oribi/log"

module Oribi
  # Rack::QueryParser with parse_query and parse_nested_query in C
  # (Oribi::Query.parse): the splitting, unescaping and the nested-name
  # walk of _normalize_params, as the loaded Rack (3.0, 3.1 or 3.2) does
  # them. What the C loop cannot read as Rack would (another separator, an
  # unescaper block, a params class or limits it does not know, a String in
  # an encoding where a byte scan is not a character scan) is left to Rack.
  # Installed by the fast_query_parser option.
  class QueryParser < Rack::QueryParser
    SEPARATORS = { nil => 0, "&" => 0, ";" => 1, ";," => 2 }.freeze
    # The C walk recurses once per level of a name: a deeper limit than
    # this is left to Rack.
    MAX_NATIVE_DEPTH = 1000

    # The release series whose parsers this one was compared with (and
    # their differences mirrored): a later one may walk names otherwise
    # where no probe looks.
    KNOWN_RELEASES = /\A3\.[012]\./

    # Inputs on which the loaded Rack and the C loop must agree before the
    # C loop is used: one for each way the Rack releases differ.
    PROBES = [
      "a=1&a=2&b", "a[b][]=1&a[b][]=2&c[d]", "a[][b]=1&a[][c]=2&a[][b]=3", "a=1&a[b]=2", "a=1&a[]=2", "a=%",
      "a=1&b=\xFF", "a[b][c]=1", "a=1&b=2&c=3"
    ].freeze

    class << self
      # Makes Rack's default parser (what Rack::Request uses) one of this
      # class, with its limits. A parser of another class (an app's own), or
      # any under a Rack this one does not mirror, is left in place (the log
      # says so); returns the one in place.
      def install
        current = Rack::Utils.default_query_parser
        if !dialect
          Log.info("fast_query_parser: off, #{@unsupported}")
        elsif current.instance_of?(Rack::QueryParser)
          Rack::Utils.default_query_parser = from(current)
        elsif !current.is_a?(self)
          Log.info("fast_query_parser: off, the app installed its own #{current.class}")
        end
        Rack::Utils.default_query_parser
      end

      # Rack's default parser, made again as this class with the same limits.
      def from(parser)
        new(parser.instance_variable_get(:@params_class), parser.param_depth_limit,
            bytesize_limit: parser.instance_variable_get(:@bytesize_limit),
            params_limit: parser.instance_variable_get(:@params_limit))
      end

      # How the loaded Rack parses, as Query.parse flags, or nil when the C
      # loop does not mirror it (then @unsupported says why). Found by
      # asking Rack, once.
      def dialect
        return @dialect if defined?(@dialect)

        @dialect = detect
      end

      private

      def detect
        unless KNOWN_RELEASES.match?(Rack.release)
          return unsupported("Rack #{Rack.release} is newer than the releases it was checked against (3.0 to 3.2)")
        end
        unless Rack::QueryParser.instance_method(:initialize).parameters.include?(%i[key params_limit])
          return unsupported("Rack #{Rack.release} has no params_limit (3.0.16, 3.1.14 and later have)")
        end

        flags = Rack::QueryParser::Params < Hash ? Query::PARAMS_HASH : 0
        flags |= Query::WRAP_FLAT if rack_error { |p| p.parse_query("a=%") }.is_a?(Rack::QueryParser::InvalidParameterError)
        flags |= Query::SIZE_IN_LIMIT if rack_error(bytesize_limit: 1) { |p| p.parse_query("ab") }.message.include?("(2)")
        probe = PROBES.find { |qs| !agree?(qs.b, flags) }
        probe ? unsupported("Rack #{Rack.release} parses #{probe.inspect} otherwise") : flags
      end

      def unsupported(why)
        @unsupported = "#{why}; Rack's own parser stays"
        nil
      end

      def rack_error(**limits)
        yield Rack::QueryParser.new(Rack::QueryParser::Params, 32, **limits)
        nil
      rescue StandardError => e
        e
      end

      def agree?(qs, flags)
        [Query::NESTED, 0].all? do |nested|
          rack = outcome { rack_parse(qs, nested) }
          native = outcome { Query.parse(qs, 0, flags | nested, Rack::QueryParser::Params, 32, 4096, 4096) }
          rack == native
        end
      end

      def rack_parse(qs, nested)
        rack = Rack::QueryParser.new(Rack::QueryParser::Params, 32, bytesize_limit: 4096, params_limit: 4096)
        nested.zero? ? rack.parse_query(qs) : rack.parse_nested_query(qs)
      end

      def outcome
        shape(yield)
      rescue StandardError => e
        [e.class, e.message]
      end

      def shape(obj)
        case obj
        when Hash then [obj.class, obj.map { |k, v| [k, shape(v)] }]
        when Array then obj.map { |v| shape(v) }
        else obj
        end
      end
    end

    def initialize(...)
      super
      @flags = self.class.dialect
      @native = @flags && @params_class == Params && fixnum_limit?(@param_depth_limit) &&
                @param_depth_limit <= MAX_NATIVE_DEPTH && fixnum_limit?(@bytesize_limit) && fixnum_limit?(@params_limit)
    end

    def parse_nested_query(qs, separator = nil) = native(qs, separator, Query::NESTED) || super

    def parse_query(qs, separator = nil, &unescaper) = (!unescaper && native(qs, separator, 0)) || super

    # Rack 3.2's Request#POST reads a urlencoded form with this and
    # normalize_params on each pair (into make_params).
    if Rack::QueryParser.method_defined?(:parse_query_pairs)
      def parse_query_pairs(qs, separator = nil) = native(qs, separator, Query::PAIRS) || super
    end

    # Where Params is a Hash (3.1, 3.2) and the name a UTF-8 String (what
    # unescaping gives; a byte walk is a character walk there).
    def normalize_params(params, name, v, _depth = nil)
      return super unless @native && @flags.anybits?(Query::PARAMS_HASH) && params.instance_of?(@params_class) &&
                          name.instance_of?(String) && name.encoding == Encoding::UTF_8

      Query.normalize(params, name, v, @flags | Query::NESTED, @params_class, @param_depth_limit)
    end

    private

    # What Query.parse makes of qs, or false when Rack must parse it.
    def native(qs, separator, mode)
      sep = @native && SEPARATORS[separator]
      sep && Query.parse(qs, sep, @flags | mode, @params_class, @param_depth_limit, @bytesize_limit, @params_limit)
    end

    # Rack's limits compared in C must fit a C long; below 1 Rack raises
    # or splits differently, so those stay Rack's too.
    def fixnum_limit?(limit) = limit.is_a?(Integer) && limit >= 1 && limit < 2**62
  end
end
