# frozen_string_literal: true

require "minitest/autorun"
require "minitest/mock"
require_relative "support/query_differential"

# Oribi::QueryParser must be indistinguishable from Rack::QueryParser:
# every input below, and thousands of seeded random ones, go through both
# and the results (classes, bytes, encodings) or errors (class, message)
# must be the same.
class QueryParserTest < Minitest::Test
  D = QueryDifferential
  DEFAULT = D::Limits.new(32, 4_194_304, 4096)

  CASES = [
    "", "a", "a=", "=", "=a", "==", "a=b=c", "a=1&a=2", "a&a=1", "a=1&a", "&", "&&a=1&&", "& a=1&  b=2",
    "a =1", " a=1", "a+b=c+d", "a%20b=%41%42", "%2B=%2b", "a=%", "a=%4", "a=%zz", "%=1", "a=%%41", "a=%2541",
    "a=%E9", "a=%C3%A9", "é=ü", "a=\xFF", "a=%FF&b=\xFF", "a[]=1&a[]=2", "a[b]=1&a[c]=2", "a[b][]=1&a[b][]=2",
    "a[][b]=1&a[][c]=2&a[][b]=3", "a[]=1&a[b]=2", "a[b]=1&a[]=2", "a=1&a[b]=2", "a[b]=1&a=2", "a[b]=1&a[b][c]=2",
    "a[", "a[=1", "a]=1", "[a]=1", "[]=1", "[=1", "a[]]=1", "a[b]c=1", "a[][]=1", "a[][][]=1", "a[b][c][d]=1",
    "a%5Bb%5D=1", "a[%FF]=1&a[%FF][x]=2", "a[][%FF]=1&a[][%FF]=2", "a[][b[c]]=1", "a[][b]c]=1",
    "a;b=1", "a,b", "a=1;b=2&c=3", "x[y][z]=1&x[y][z][]=2", "x[][y][z]=1&x[][y][w]=2&x[][y][z]=3",
    # the names the C loop builds itself, against every earlier type
    "a=1&a[]=2", "a&a[]=1", "a&a[b]=1", "a[]=1&a[]", "a[b]&a[b]=2", "a[b]=1&a[b]=2", "a[]=1&a=2&a[]=3",
    "a[b][]=1&a[b]=2", "é[b]=1&é[]=2", "%C3%A9[b]=1", "a[é]=1", "a[b c]=1", "a+b[c+d]=1", "a%5B%5D=1&a[]=2"
  ].freeze

  def assert_like_rack(limits, method, qs, sep = nil)
    diff = D.compare(limits, method, qs, sep)
    assert_nil diff, -> { "differs from Rack:\n#{diff.pretty_inspect}" }
  end

  def test_hand_written_cases_nested_and_flat_every_separator_and_encoding
    CASES.each do |qs|
      [Encoding::UTF_8, Encoding::BINARY, Encoding::US_ASCII].each do |enc|
        [nil, "&", ";", ";,"].each do |sep|
          assert_like_rack(DEFAULT, :parse_nested_query, qs.dup.force_encoding(enc), sep)
          assert_like_rack(DEFAULT, :parse_query, qs.dup.force_encoding(enc), sep)
        end
      end
    end
  end

  def test_limits_give_rack_errors_and_messages
    assert_raises_like_rack(D::Limits.new(32, 5, 4096), "a=1234")
    assert_raises_like_rack(D::Limits.new(32, 4096, 2), "a=1&b=2&c=3&d")
    assert_raises_like_rack(D::Limits.new(2, 4096, 4096), "a[b][c]=1")
    assert_raises_like_rack(D::Limits.new(32, 4096, 4096), "a=1&a[b]=2")
    assert_raises_like_rack(D::Limits.new(32, 4096, 4096), "a=%")
    assert_raises_like_rack(D::Limits.new(32, 4096, 4096), "a=1&b=\xFF".dup.force_encoding("UTF-8"))
  end

  def assert_raises_like_rack(limits, qs)
    rack, oribi = D.parsers(limits)
    expected = assert_raises(StandardError) { rack.parse_nested_query(qs) }
    actual = assert_raises(expected.class) { oribi.parse_nested_query(qs) }
    assert_equal [expected.message, expected.message.encoding], [actual.message, actual.message.encoding]
  end

  def test_the_c_loop_runs_for_the_requests_it_is_meant_for
    # on every Rack the gemspec allows (rake test:rack runs 3.0 and 3.1)
    assert Oribi::QueryParser.dialect, "not mirrored on Rack #{Rack.release}: " \
                                       "#{Oribi::QueryParser.instance_variable_get(:@unsupported)}"
    parser = D.parsers(DEFAULT).last # (its first one asks Rack, through Query.parse)
    calls = 0
    counting = Module.new { define_method(:parse) { |*a| calls += 1 and super(*a) } }
    Oribi::Query.singleton_class.prepend(counting)
    assert_equal({ "a" => { "b" => ["1"] } }, parser.parse_nested_query("a[b][]=1", "&"))
    assert_equal({ "q" => "x y" }, parser.parse_query("q=x+y"))
    assert_equal 2, calls
  ensure
    counting&.send(:remove_method, :parse)
  end

  def test_install_keeps_rack_limits_and_leaves_an_apps_own_parser
    saved = Rack::Utils.default_query_parser
    Rack::Utils.default_query_parser = Rack::QueryParser.new(Rack::QueryParser::Params, 7, bytesize_limit: 99)
    installed = Oribi::QueryParser.install
    assert_instance_of Oribi::QueryParser, Rack::Utils.default_query_parser
    assert_equal [7, 99], [installed.param_depth_limit, installed.instance_variable_get(:@bytesize_limit)]
    Rack::Utils.param_depth_limit = 3
    assert_instance_of Oribi::QueryParser, Rack::Utils.default_query_parser
    own = Class.new(Rack::QueryParser).make_default(5)
    Rack::Utils.default_query_parser = own
    _, err = capture_subprocess_io { assert_same own, Oribi::QueryParser.install }
    assert_match(/fast_query_parser: off, the app installed its own/, err)
  ensure
    Rack::Utils.default_query_parser = saved
  end

  # A Rack whose parser answers one of the probes otherwise (as an older
  # or newer release would) keeps its own parser, and the log says which.
  def test_install_leaves_a_rack_that_parses_otherwise
    err = install_over_rack do |rack|
      with_dialect_probed(-> { { "a" => { "b" => "" } } if _1 == "a[b][c]=1" }) do
        assert_nil Oribi::QueryParser.dialect
        assert_same rack, Oribi::QueryParser.install
        refute Oribi::QueryParser.new(Rack::QueryParser::Params, 32).instance_variable_get(:@native)
      end
    end
    assert_match(/fast_query_parser: off, Rack #{Rack.release} parses "a\[b\]\[c\]=1" otherwise/, err)
    assert Oribi::QueryParser.dialect, "probed again with Rack's own answers"
  end

  def test_install_leaves_a_later_rack
    err = install_over_rack do |rack|
      Rack.stub(:release, "3.3.0") do
        forget_dialect
        assert_same rack, Oribi::QueryParser.install
      end
    ensure
      forget_dialect
      Oribi::QueryParser.dialect
    end
    assert_match(/fast_query_parser: off, Rack 3.3.0 is newer than the releases it was checked against/, err)
  end

  # Rack's own default parser in place for the block; returns what was
  # logged meanwhile.
  def install_over_rack
    saved = Rack::Utils.default_query_parser
    Rack::Utils.default_query_parser = rack = Rack::QueryParser.make_default(32)
    capture_subprocess_io { yield rack }[1]
  ensure
    Rack::Utils.default_query_parser = saved
  end

  # Probes the Rack in place with parse_nested_query answering odd.(qs)
  # where that is not nil, then again as it is.
  def with_dialect_probed(odd)
    patch = Module.new { define_method(:parse_nested_query) { |qs, *a| odd.(qs) || super(qs, *a) } }
    Rack::QueryParser.prepend(patch)
    forget_dialect
    yield
  ensure
    patch.send(:remove_method, :parse_nested_query)
    forget_dialect
    Oribi::QueryParser.dialect
  end

  def forget_dialect
    parser = Oribi::QueryParser
    parser.remove_instance_variable(:@dialect) if parser.instance_variable_defined?(:@dialect)
  end

  def test_seeded_random_inputs_agree
    seed = Integer(ENV.fetch("QUERY_SEED", 19))
    mismatches = D.run(seed, 8000)
    assert_empty mismatches.first(3), "seed #{seed}: #{mismatches.size} of 8000 differ"
  end

  # A quadratic step would make the 100x input take 10,000x the time of the
  # small one; linear work takes about 100x. Timed in this thread's CPU
  # time with the GC off, so that neither a neighbour on a busy machine nor
  # a collection landing in one run moves the ratio.
  def test_time_grows_linearly_with_input
    parser = D.parsers(D::Limits.new(32, 2**24, 2**20)).last
    small, big = [100, 10_000].map { |n| Array.new(n) { |i| "k#{i}[x]=%41+#{i}" }.join("&") }
    t_small = Array.new(5) { cpu_time { 20.times { parser.parse_nested_query(small) } } / 20 }.min
    t_big = Array.new(3) { cpu_time { parser.parse_nested_query(big) } }.min
    assert_operator t_big, :<, t_small * 100 * 8, "100x the input took #{(t_big / t_small).round}x the time"
  end

  def cpu_time
    GC.start
    GC.disable
    t = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
    yield
    Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - t
  ensure
    GC.enable
  end
end

require_relative "test_helper"

# Through a real server: with fast_query_parser the worker's
# Rack::Request parses with Oribi::QueryParser, to Rack's results.
class QueryParserServerTest < Minitest::Test
  include HTTPClient

  QUERY = "a[b][]=1&a[b][]=2&c=%41+b&d"
  FORM = "user[name]=Ann&user[tags][]=x&q=%E9"

  def params_over(*args)
    srv = ServerProcess.new("params.ru", *args, workers: 1)
    form = { "Content-Type" => "application/x-www-form-urlencoded" }
    [request(srv.tcp, "/?#{QUERY}", method: "POST", headers: form, body: FORM).body,
     request(srv.tcp, "/?a=%zz").body]
  ensure
    srv&.stop
  end

  def test_the_option_installs_the_c_parser_with_rack_results
    rack = Rack::QueryParser.make_default(32)
    expected = "#{rack.parse_nested_query(QUERY).inspect}\n#{rack.parse_nested_query(FORM).inspect}"
    ok, bad = params_over # on by default
    assert_equal "Oribi::QueryParser 32\n#{expected}", ok
    assert_equal "Oribi::QueryParser 32\nRack::QueryParser::InvalidParameterError: invalid %-encoding (%zz)", bad
    ok, = params_over("--no-fast-query-parser")
    assert_equal "Rack::QueryParser 32\n#{expected}", ok
  end
end
