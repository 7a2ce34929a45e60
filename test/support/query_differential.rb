# frozen_string_literal: true

require "oribi/query_parser"
require "pp"

# Rack::QueryParser and Oribi::QueryParser given the same input: their
# results (deeply: classes, String bytes, encodings, frozenness) or errors
# (class, message and its encoding) must be the same. Inputs come from a
# seeded generator biased towards what the parsers branch on. Used by
# test/query_parser_test.rb and fuzz/query_diff.rb.
module QueryDifferential
  # Pieces an input is made of: names and brackets the nesting rules look
  # at, separators of every set, escapes good and bad, non-ASCII bytes.
  TOKENS = [
    "a", "b", "c", "x", "0", "[", "]", "[]", "[a]", "[b]", "[]", "[][a]", "[][b]", "[[", "]]",
    "=", "=", "&", "&", "& ", " ", ";", ",", "; ", "%", "%4", "%41", "%5B", "%5D", "%5b",
    "%26", "%3D", "%3d", "%zz", "%%", "+", "%2B", "é", "\xFF", "%FF", "%E9", "%C3%A9", "%00", "\t"
  ].freeze
  NAMES = ["a", "b", "a[]", "a[b]", "a[b][]", "a[][b]", "a[][c]", "a[b][c]", "a[][b][c]", "b[]", "a[", "[a]",
           "[]", "a]b", "a[]]", "a[b]c", "a[][]", "a[b][c][d][e]"].freeze
  SEPARATORS = [nil, nil, "&", "&", ";", ";,", ",", "&;"].freeze
  ENCODINGS = [Encoding::UTF_8, Encoding::UTF_8, Encoding::BINARY, Encoding::US_ASCII,
               Encoding::Shift_JIS, Encoding::ISO_8859_1].freeze

  Limits = Struct.new(:depth, :bytesize, :params)

  module_function

  def parsers(limits)
    args = [Rack::QueryParser::Params, limits.depth]
    kw = { bytesize_limit: limits.bytesize, params_limit: limits.params }
    [Rack::QueryParser.new(*args, **kw), Oribi::QueryParser.new(*args, **kw)]
  end

  # An input of up to max_pairs pairs: well-formed name=value pairs mixed
  # with runs of random tokens.
  def input(rng, max_pairs: 8)
    parts = Array.new(rng.rand(max_pairs + 1)) do
      if rng.rand(3).zero?
        Array.new(rng.rand(1..6)) { TOKENS.sample(random: rng) }.join
      else
        pair(rng)
      end
    end
    parts.join(["&", "&", ";", "& ", "&&"].sample(random: rng)).b
  end

  def pair(rng)
    name = NAMES.sample(random: rng)
    name = name.gsub("[", "%5B") if rng.rand(8).zero?
    value = Array.new(rng.rand(3)) { TOKENS.sample(random: rng) }.join
    rng.rand(6).zero? ? name : "#{name}=#{value}"
  end

  def limits(rng)
    return Limits.new(32, 4_194_304, 4096) if rng.rand(2).zero?

    Limits.new(rng.rand(-1..5), rng.rand(0..300), rng.rand(-1..12))
  end

  def encode(rng, bytes)
    bytes.dup.force_encoding(ENCODINGS.sample(random: rng))
  end

  # What a call gives, in comparable form.
  # Rack warns ("historical binary regexp match") on non-ASCII text; the C
  # loop has no regexp to warn about. Warnings are not results.
  def outcome(parser, method, qs, sep, block)
    verbose = $VERBOSE
    $VERBOSE = nil
    return shape(form(parser, qs, sep)) if method == :form

    shape(block ? parser.public_send(method, qs, sep, &block) : parser.public_send(method, qs, sep))
  rescue StandardError => e
    [:error, e.class, e.message, e.message.encoding]
  ensure
    $VERBOSE = verbose
  end

  # Rack::Request#POST on a urlencoded form (expand_param_pairs): the
  # pairs (Rack's own, so each parser's normalize_params gets the same
  # names), then normalize_params on each; the pairs must stay as they were.
  def form(parser, qs, sep)
    pairs = Rack::QueryParser.new(Rack::QueryParser::Params, 32).parse_query_pairs(qs, sep)
    before = shape(pairs)
    params = parser.make_params
    pairs.each { |k, v| parser.normalize_params(params, k, v) }
    [params.to_params_hash, shape(pairs) == before]
  end

  def shape(obj)
    case obj
    when Hash then [obj.class, obj.map { |k, v| [shape(k), shape(v)] }]
    when Array then [obj.class, obj.map { |v| shape(v) }]
    when String then [obj.class, obj.b, obj.encoding, obj.frozen?]
    else obj
    end
  end

  # One comparison; returns nil when they agree, else a description.
  def compare(limits, method, qs, sep, block = nil)
    rack, oribi = parsers(limits).map { |p| outcome(p, method, qs, sep, block) }
    return if rack == oribi

    { limits: limits.to_a, method: method, qs: qs, encoding: qs.encoding, sep: sep, rack: rack, oribi: oribi }
  end

  # n random comparisons from seed; returns the mismatches.
  def run(seed, n)
    rng = Random.new(seed)
    Array.new(n) { random_case(rng) }.compact
  end

  # The entry points the loaded Rack has: parse_query_pairs is 3.2's, and
  # :form is what its Request#POST does with a form (the pairs, then
  # normalize_params on each).
  METHODS = [:parse_query, :parse_nested_query, :parse_nested_query, :parse_nested_query,
             *([:parse_query_pairs, :form] if Rack::QueryParser.method_defined?(:parse_query_pairs))].freeze

  def random_case(rng, max_pairs: 8)
    method = METHODS.sample(random: rng)
    block = method == :parse_query && rng.rand(10).zero? ? ->(s) { s.upcase } : nil
    qs = encode(rng, input(rng, max_pairs: max_pairs))
    compare(limits(rng), method, qs, SEPARATORS.sample(random: rng), block)
  end
end
