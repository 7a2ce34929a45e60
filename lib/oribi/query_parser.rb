# frozen_string_literal: true

require "rack"
require "rack/query_parser"
require "oribi"
require "oribi/log"

module Oribi
  # Rack::QueryParser with the pair loop in C (Oribi::Query.parse): the
  # splitting, unescaping and plain names are done there, and a bracketed
  # name goes through Rack's own _normalize_params, so results and errors
  # are Rack's. What the C loop cannot read as Rack would (another
  # separator, an unescaper block, a params class or limits it does not
  # know, a String in an encoding where a byte scan is not a character
  # scan) is left to Rack. Installed by the fast_query_parser option.
  class QueryParser < Rack::QueryParser
    SEPARATORS = { nil => 0, "&" => 0, ";" => 1, ";," => 2 }.freeze
    # The Rack whose parser this one mirrors and is tested against; with
    # another, install leaves Rack's parser in place.
    RACK_RELEASE = /\A3\.2\./

    # Makes Rack's default parser (what Rack::Request uses) one of this
    # class, with its limits. A parser of another class (an app's own), or
    # any under another Rack release, is left in place (the log says so);
    # returns the one in place.
    def self.install
      current = Rack::Utils.default_query_parser
      if !RACK_RELEASE.match?(Rack.release)
        Log.info("fast_query_parser: off, it mirrors Rack 3.2 and this is Rack #{Rack.release}")
      elsif current.instance_of?(Rack::QueryParser)
        Rack::Utils.default_query_parser = from(current)
      elsif !current.is_a?(self)
        Log.info("fast_query_parser: off, the app installed its own #{current.class}")
      end
      Rack::Utils.default_query_parser
    end

    # Rack's default parser, made again as this class with the same limits.
    def self.from(parser)
      new(parser.instance_variable_get(:@params_class), parser.param_depth_limit,
          bytesize_limit: parser.bytesize_limit, params_limit: parser.instance_variable_get(:@params_limit))
    end

    def initialize(...)
      super
      @native = @params_class == Params && fixnum_limit?(@param_depth_limit) &&
                fixnum_limit?(@bytesize_limit) && fixnum_limit?(@params_limit)
    end

    def parse_nested_query(qs, separator = nil)
      sep = @native && SEPARATORS[separator]
      return super unless sep

      params = make_params
      return super unless native(qs, sep, params, @param_depth_limit >= 2 ? 2 : 1)

      params.to_h
    end

    def parse_query(qs, separator = nil, &unescaper)
      sep = !unescaper && @native && SEPARATORS[separator]
      return super unless sep

      params = make_params
      return super unless native(qs, sep, params, 0)

      params.to_h
    end

    private

    # Rack's limits compared in C must fit a C long; below 1 Rack raises
    # or splits differently, so those stay Rack's too.
    def fixnum_limit?(limit) = limit.is_a?(Integer) && limit >= 1 && limit < 2**62

    def native(qs, sep, params, nested)
      Query.parse(self, qs, sep, params, nested, @bytesize_limit, @params_limit)
    rescue ArgumentError => e
      # each_query_pair's rescue: it also covers Rack's _normalize_params.
      raise InvalidParameterError, e.message, e.backtrace
    end
  end
end
