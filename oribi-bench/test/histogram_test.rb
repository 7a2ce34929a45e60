# frozen_string_literal: true

require "minitest/autorun"
require "oribi/loadgen"

# The histogram behind the load generator's latencies, through
# Oribi::Loadgen.histogram_percentiles. Its promise (histogram.h): values
# below 2048 are exact, larger ones within 1/2048 of the true value, and
# merging histograms loses nothing.
class HistogramTest < Minitest::Test
  PCTS = [0, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 100].freeze
  ONE_HOUR_US = 3_600_000_000

  def percentiles(values, pcts = PCTS, parts = 1)
    Oribi::Loadgen.histogram_percentiles(values, pcts, parts)
  end

  # Nearest rank, in exact arithmetic.
  def exact(sorted, pct)
    return sorted.first if pct.zero?

    rank = (Rational(pct.to_s) * sorted.size / 100).ceil
    sorted[rank.clamp(1, sorted.size) - 1]
  end

  def assert_within_precision(values, pcts = PCTS)
    sorted = values.sort
    got = percentiles(values, pcts)
    pcts.zip(got).each do |pct, value|
      want = exact(sorted, pct)
      tolerance = want < 2048 ? 0 : want / 2048.0
      assert_in_delta want, value, tolerance, "p#{pct}: want #{want}, got #{value}"
      assert_operator (value - want).abs, :<=, want * 0.001, "p#{pct}: not 3 significant digits"
    end
  end

  def test_log_uniform_values_from_one_microsecond_to_one_hour
    rng = Random.new(42)
    values = Array.new(20_000) { Math.exp(rng.rand * Math.log(ONE_HOUR_US)).round }
    assert_within_precision(values)
  end

  def test_typical_latencies_are_exact_below_2048
    rng = Random.new(7)
    values = Array.new(10_000) { rng.rand(2048) }
    sorted = values.sort
    assert_equal PCTS.map { |p| exact(sorted, p) }, percentiles(values)
  end

  def test_every_power_of_two_boundary
    values = (0..31).flat_map { |k| [(1 << k) - 1, 1 << k, (1 << k) + 1] }.uniq
    values.each { |v| assert_within_precision([v]) }
    assert_within_precision(values)
  end

  def test_a_tight_cluster_is_resolved
    # 3 significant digits: 1_000_000 and 1_001_000 us must not merge.
    values = [1_000_000] * 500 + [1_001_000] * 500
    p25, p75 = percentiles(values, [25, 75])
    assert_in_delta 1_000_000, p25, 1_000_000 / 2048.0
    assert_in_delta 1_001_000, p75, 1_001_000 / 2048.0
    refute_equal p25, p75
  end

  def test_merging_parts_equals_one_histogram
    rng = Random.new(3)
    values = Array.new(5_000) { rng.rand(10_000_000) }
    whole = percentiles(values)
    [2, 3, 7, 64].each { |parts| assert_equal whole, percentiles(values, PCTS, parts), "#{parts} parts" }
  end

  def test_min_and_max_are_exact
    values = [123_456_789, 5, 987_654_321]
    assert_equal [5, 987_654_321], percentiles(values, [0, 100])
  end

  def test_values_past_the_range_are_clamped_but_max_stays_exact
    huge = Oribi::Loadgen::HISTOGRAM_MAX * 4
    p50, p100 = percentiles([1, huge, huge], [50, 100])
    assert_equal huge, p100
    assert_in_delta Oribi::Loadgen::HISTOGRAM_MAX, p50, Oribi::Loadgen::HISTOGRAM_MAX / 2048.0
  end

  def test_empty_gives_nil
    assert_equal [nil, nil], percentiles([], [50, 99])
  end

  def test_bad_input_raises
    assert_raises(ArgumentError) { percentiles([-1], [50]) }
    assert_raises(ArgumentError) { percentiles([1.5], [50]) }
    assert_raises(ArgumentError) { percentiles([1], [101]) }
    assert_raises(ArgumentError) { percentiles([1], [50], 0) }
  end
end
