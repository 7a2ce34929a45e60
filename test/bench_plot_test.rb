# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "minitest/autorun"
require "oribi/bench"
require "open3"
require "tmpdir"

# --plot: one self-contained page; its script runs (under node with a stub
# canvas, when node is installed) and draws both charts.
class BenchPlotTest < Minitest::Test
  RESULT = {
    percentiles: [[0.0, 90], [50.0, 120], [90.0, 300], [99.0, 900_000], [99.9, 990_000], [100.0, 1_000_000]],
    series: [{ count: 100, errors: 0, mean: 120.5, p50: 118, p99: 400, max: 700 },
             { count: 0, errors: 3, mean: nil, p50: nil, p99: nil, max: nil },
             { count: 100, errors: 0, mean: 500_000.0, p50: 480_000, p99: 990_000, max: 1_000_000 }]
  }.freeze

  def test_page_is_self_contained_and_carries_the_data
    html = Oribi::Bench::Plot.html(RESULT, interval: 0.5, title: "t </script><b>")
    refute_match(/<script[^>]+src|<link|\bhref=|@import|url\(|fetch\(/, html)
    assert_includes html, "&lt;/script&gt;"
    refute_includes html.split("<script>", 2)[1].split("</script>")[0], "</script"
    data = Oribi::Bench::Plot.data(RESULT, 0.5, "t")
    assert_equal [0.0, 0.5, 1.0], data[:series].map { |s| s[:t] }
    assert_equal 3, data[:series][1][:errors]
  end

  STUB = <<~JS
    const calls = { lineTo: 0, arc: 0, fillText: 0 };
    const ctx = new Proxy({}, { get: (o, k) => k in o ? o[k] : (...a) => { if (k in calls) calls[k]++; },
                               set: (o, k, v) => { o[k] = v; return true; } });
    const els = {};
    globalThis.document = { getElementById: id => els[id] ||= { width: 1000, height: 400, getContext: () => ctx, innerHTML: "" } };
  JS

  def test_script_draws_both_charts
    node = ENV["PATH"].split(":").map { |d| File.join(d, "node") }.find { |f| File.executable?(f) }
    skip "node not installed" unless node
    html = Oribi::Bench::Plot.html(RESULT, interval: 0.5)
    script = html[%r{<script>(.*)</script>}m, 1]
    js = STUB + script + "\nconsole.log(JSON.stringify(calls), els.key.innerHTML.includes('p99'));"
    out, err, st = Open3.capture3(node, "-e", js)
    assert st.success?, err
    calls, key = out.split
    calls = JSON.parse(calls)
    assert_operator calls["lineTo"], :>=, 5 + 4, out # percentile curve and the time lines
    assert_equal 6, calls["arc"] # one dot per percentile
    assert_equal "true", key
  end
end
