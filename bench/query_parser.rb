# frozen_string_literal: true

# Oribi::QueryParser (fast_query_parser) against Rack::QueryParser, the
# parser alone, in one process, on the same inputs, in turn.
#
#   bundle exec rake compile
#   bundle exec ruby bench/query_parser.rb [--time 0.3] [--rounds 5]
#
# Each input is parsed by each parser for --time seconds, --rounds times,
# alternating, so that a noisy neighbour hits both alike; the table has each
# parser's best round (ns per parse) and Rack's time over Oribi's. The
# growing inputs (1 KB to 1 MB of the 4 KB form's pairs, with the params
# and bytesize limits raised for both) show whether time per byte stays
# flat: it does for both when neither is quadratic.
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../oribi-bench/lib", __dir__))
require "oribi/query_parser"
require "optparse"

module Bench
  class QueryParser
    FORM = Array.new(20) do |i|
      "user[address][line#{i}]=#{'x%C3%A9+y' * 10}&tags[]=tag+#{i}&item#{i}=#{'v%2Fw' * 12}"
    end.join("&")

    INPUTS = {
      "short (a=1)" => "a=1",
      "typical (10 params)" => Array.new(10) { |i| "param#{i}=value+#{i}%21" }.join("&"),
      "plack (5 params)" => "foo=bar&bar=baz&q=HTTP%3A%3ARequest%3A%3ACommon&ie=UTF-8&sourceid=chrome",
      "nested (5 params)" => "user[name]=Ann&user[email]=a%40b.c&user[roles][]=x&user[roles][]=y&page=2",
      "deep (5 params)" => "order[items][][sku]=A1&order[items][][qty]=2&order[items][][sku]=B2&" \
                           "order[items][][qty]=1&order[ship][addr][city]=Paris",
      "4 KB form" => FORM.byteslice(0, FORM.rindex("&", 4096))
    }.freeze

    def initialize(argv)
      @time = 0.3
      @rounds = 5
      OptionParser.new do |o|
        o.on("--time S", Float) { |v| @time = v }
        o.on("--rounds N", Integer) { |v| @rounds = v }
      end.parse!(argv)
    end

    def run
      puts "| input | bytes | Rack ns/parse | Oribi ns/parse | Rack / Oribi |", "|---|---:|---:|---:|---:|"
      INPUTS.each { |name, qs| row(name, qs, parsers(Rack::QueryParser::Params, 32)) }
      big = parsers(Rack::QueryParser::Params, 32, bytesize_limit: 2**24, params_limit: 2**20)
      [1, 10, 100, 1000].each { |kb| row("#{kb} KB form", grow(kb * 1024), big) }
    end

    def parsers(*args, **kw)
      [Rack::QueryParser.new(*args, **kw), Oribi::QueryParser.new(*args, **kw)]
    end

    def grow(bytes)
      s = +""
      s << FORM << "&" while s.bytesize < bytes
      s.byteslice(0, s.rindex("&", bytes))
    end

    def row(name, qs, parsers)
      unless parsers[0].parse_nested_query(qs, "&") == parsers[1].parse_nested_query(qs, "&")
        abort "#{name}: results differ"
      end
      best = [Float::INFINITY, Float::INFINITY]
      @rounds.times { parsers.each_with_index { |p, i| best[i] = [best[i], measure(p, qs)].min } }
      puts format("| %s | %d | %.0f | %.0f | %.2f |", name, qs.bytesize, *best, best[0] / best[1])
    end

    # ns per parse_nested_query(qs, "&") (what Rack::Request#GET and #POST call).
    def measure(parser, qs)
      n = 0
      t0 = now
      deadline = t0 + @time
      while (t = now) < deadline || n.zero?
        parser.parse_nested_query(qs, "&")
        n += 1
      end
      (t - t0) * 1e9 / n
    end

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end

Bench::QueryParser.new(ARGV).run if $PROGRAM_NAME == __FILE__
