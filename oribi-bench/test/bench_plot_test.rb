# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../../lib", __dir__))
$LOAD_PATH.unshift(__dir__)
require "minitest/autorun"
require "oribi/bench"
require "support/headless_chromium"
require "tmpdir"

# --plot: one self-contained page (uPlot inline), opened in headless
# Chromium as a reader would: every chart drawn, nothing on the console.
class BenchPlotTest < Minitest::Test
  RESULT = {
    percentiles: [[0.0, 0], [50.0, 120], [90.0, 300], [99.0, 900_000], [99.9, 990_000], [99.99, 995_000],
                  [99.999, 999_000], [100.0, 1_000_000]],
    series: [{ count: 100, errors: 0, mean: 120.5, p50: 118, p99: 400, max: 700 },
             { count: 0, errors: 3, mean: nil, p50: nil, p99: nil, max: nil },
             { count: 100, errors: 0, mean: 500_000.0, p50: 480_000, p99: 990_000, max: 1_000_000 }]
  }.freeze

  def test_page_is_self_contained_and_carries_the_data
    html = Oribi::Bench::Plot.html(RESULT, interval: 0.5, title: "t </script><b>")
    refute_match(/<script[^>]+src|<link|\bhref=|@import|url\(|fetch\(/, html)
    assert_includes html, "&lt;/script&gt;"
    assert_includes html, "uPlot", "the charting library is inline"
    data = Oribi::Bench::Plot.data(RESULT, 0.5, "t")
    assert_equal [0.0, 0.5, 1.0], data[:series].map { |s| s[:t] }
    assert_equal 3, data[:series][1][:errors]
  end

  def render(result)
    skip "chromium not installed" unless HeadlessChromium.available?
    Dir.mktmpdir("oribi-plot") do |dir|
      html = File.join(dir, "p.html")
      File.write(html, Oribi::Bench::Plot.html(result, interval: 0.5, title: "oribi bench test"))
      page = HeadlessChromium.render(html, File.join(dir, "p.png"))
      assert_operator File.size(page.png), :>, 10_000, "a screenshot with something on it"
      yield page
    end
  end

  def test_chromium_draws_the_three_charts_without_a_console_line
    render(RESULT) do |page|
      assert_equal [], page.console
      assert_match(/data-drawn="3"/, page.dom, "latency, throughput and percentile charts")
      # Labelled log ticks: 1, 2 and 5 of each decade, and the percentile
      # axis up to 99.999% and the maximum.
      labels = page.dom[/data-labels="([^"]*)"/, 1].to_s.split("|")
      ["100 µs", "200 µs", "500 µs", "1 ms", "2 ms", "5 ms", "500 ms", "1 s", "99%", "99.999%", "max"].each do |label|
        assert_includes labels, label
      end
      assert page.dom.include?("responses/s") && page.dom.include?("errors/s"), "the throughput legend"
    end
  end

  def test_chromium_draws_an_empty_run_without_an_error
    render({ series: [], percentiles: [] }) do |page|
      assert_equal [], page.console
      assert_match(/data-drawn="0"/, page.dom)
      assert_includes page.dom, "no samples"
    end
  end
end
