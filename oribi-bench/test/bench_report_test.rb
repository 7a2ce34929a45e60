# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../../lib", __dir__))
require "minitest/autorun"
require "oribi/bench"

# The reports against golden files, from a fixed synthetic result. To
# regenerate after an intended change: ORIBI_GOLDEN=1 and read the diff.
class BenchReportTest < Minitest::Test
  GOLDEN = File.join(__dir__, "golden")

  RESULT = {
    requests: 9990,
    errors: { connect: 4, read: 3, write: 0, timeout: 2, parse: 1 },
    status: { 200 => 9000, 301 => 490, 404 => 300, 503 => 200 },
    bytes_in: 1_598_400, bytes_out: 660_000,
    elapsed: 10.004321, attack: 10.0,
    latency: { min: 87, mean: 1234.5678, p50: 950, p90: 2100, p95: 3050,
               p99: 12_345, p999: 250_000, max: 1_234_567 },
    percentiles: [[0.0, 87], [50.0, 950], [90.0, 2100], [99.0, 12_345], [99.9, 250_000], [100.0, 1_234_567]],
    late: 12, dropped: 1, scheduled: 10_001, sent: 10_000, behind: 3, busy: 0.25, retried: 2,
    causes: { connect: { 111 => 3, 24 => 1 }, read: { 0 => 2, 104 => 1 } }
  }.freeze

  def golden(name, actual)
    path = File.join(GOLDEN, name)
    File.write(path, actual) if ENV["ORIBI_GOLDEN"]
    assert_equal File.read(path), actual, "#{name} differs from its golden file"
  end

  def test_text_report_matches_golden
    golden("report.txt", Oribi::Bench::Report.text(RESULT))
  end

  def test_json_report_matches_golden
    golden("report.json", Oribi::Bench::Report.json(RESULT))
  end

  def test_histogram_report_matches_golden
    golden("report.hist", Oribi::Bench::Report.histogram(RESULT))
  end

  def test_text_report_arithmetic
    t = Oribi::Bench::Report.totals(RESULT)
    assert_equal 10_000, t[:total]
    assert_equal 9490, t[:ok]
    assert_in_delta 1000.0, t[:rate], 1e-9          # requests / attack
    assert_in_delta 9490 / 10.004321, t[:throughput], 1e-9 # successes / total
    assert_in_delta 0.004321, t[:wait], 1e-9
  end

  def test_text_report_has_p999_schedule_retries_and_errnos
    text = Oribi::Bench::Report.text(RESULT)
    assert_match(/^Latencies .*99\.9, max\] .* 12\.345ms, 250ms, 1\.234567s$/, text)
    assert_match(/^Schedule +\[scheduled, sent, late, dropped\] +10001, 10000, 12, 1$/, text)
    assert_match(/^Retried .* 2$/, text)
    assert_match(/^connect: 4 \(ECONNREFUSED 3, EMFILE 1\)$/, text)
    assert_match(/^read: 3 \(ECONNRESET 1\)$/, text)
    refute_match(/Warning/, text, "3 of 10000 sends behind is noise")
  end

  def test_report_warns_when_the_generator_was_the_limit
    # -r 300000 against nginx: the sender, not the server, fell behind.
    r = RESULT.merge(scheduled: 900_000, sent: 382_000, late: 380_000, dropped: 518_000, behind: 1000, busy: 0.97)
    text = Oribi::Bench::Report.text(r)
    assert_match(/^Schedule .* 900000, 382000, 380000, 518000$/, text)
    assert_match(/^Warning: the load generator was the limit \(busiest thread 97% on CPU/, text)
    # Late sends with a connection free, on a machine too busy to run us.
    assert_match(/^Warning: the load generator/, Oribi::Bench::Report.text(r.merge(busy: 0.3, behind: 300_000)))
    # Late for want of a connection, with an idle generator: the server.
    refute_match(/Warning/, Oribi::Bench::Report.text(r.merge(busy: 0.3)))
    assert_equal 518_000, JSON.parse(Oribi::Bench::Report.json(r))["dropped"]
  end

  def test_durations_print_like_go
    d = Oribi::Bench::Report.method(:duration)
    assert_equal "0s", d.(0)
    assert_equal "999ns", d.(999)
    assert_equal "1.5µs", d.(1500)
    assert_equal "12.345ms", d.(12_345_000)
    assert_equal "1.234567s", d.(1_234_567_000)
    assert_equal "2m3.5s", d.(123_500_000_000)
    assert_equal "1h0m1s", d.(3_601_000_000_000)
  end

  def test_empty_result_reports_without_dividing_by_zero
    empty = { requests: 0, errors: { connect: 0, read: 0, write: 0, timeout: 0, parse: 0 },
              status: {}, bytes_in: 0, bytes_out: 0, elapsed: 0.0,
              latency: { min: nil, mean: nil, p50: nil, p90: nil, p95: nil, p99: nil, p999: nil, max: nil },
              percentiles: [] }
    assert_match(/Requests .* 0, 0.00, 0.00/, Oribi::Bench::Report.text(empty))
    assert_equal 0, JSON.parse(Oribi::Bench::Report.json(empty))["requests"]
    assert_equal "no responses\n", Oribi::Bench::Report.histogram(empty)
  end
end
