# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../../lib", __dir__))
require "minitest/autorun"
require "oribi/tune/search"

# The rate bisection against a fake server whose limit is known: passes
# exactly up to `limit` req/s.
class TuneSearchTest < Minitest::Test
  def search(limit, start, **opts)
    rates = []
    measure = lambda do |rate, step|
      rates << [rate, step]
      { pass: rate <= limit }
    end
    [Oribi::Tune::Search.new(measure: measure, **opts).run(start), rates]
  end

  def test_doubles_from_a_pass_then_bisects
    r, rates = search(300, 100, tolerance: 0.05, max_steps: 10)
    assert_equal [100, 200, 400, 300, 350, 325, 312.5], rates.map(&:first)
    assert_equal (1..7).to_a, rates.map(&:last)
    assert_equal 300, r.rate
    assert_equal [300, 312.5], r.bracket
    assert_equal 7, r.steps.size
    assert r.passed?
  end

  def test_halves_from_a_failure_then_bisects
    r, rates = search(130, 400, tolerance: 0.05, max_steps: 10)
    assert_equal [400, 200, 100, 150, 125, 137.5, 131.25], rates.map(&:first)
    assert_equal 125, r.rate
    assert_operator r.bracket[1] - r.bracket[0], :<=, 0.05 * r.bracket[0]
  end

  def test_result_is_within_tolerance_below_the_limit
    [[1000, 10], [1000, 5000], [37, 1], [7.5, 100]].each do |limit, start|
      r, = search(limit, start, tolerance: 0.02, max_steps: 30)
      assert_operator r.rate, :<=, limit
      assert_operator r.rate, :>=, limit / 1.02, [limit, start].inspect
    end
  end

  def test_steps_are_bounded
    r, rates = search(1e9, 10, max_steps: 4)
    assert_equal [10, 20, 40, 80], rates.map(&:first)
    assert_equal 80, r.rate
    assert_equal [80, nil], r.bracket # no failing rate found: the limit is higher
  end

  def test_nothing_passes
    r, rates = search(0.5, 16, min_rate: 1, max_steps: 20)
    assert_equal [16, 8, 4, 2, 1], rates.map(&:first)
    assert_nil r.rate
    refute r.passed?
  end

  def test_a_failure_below_the_estimate_is_probed_again
    seen = Hash.new(0)
    measure = lambda do |rate, _|
      seen[rate] += 1
      { pass: rate <= 300 && !(rate == 100 && seen[rate] == 1) } # one stall at 100
    end
    r = Oribi::Tune::Search.new(measure: measure, tolerance: 0.05, max_steps: 10, confirm_below: 150).run(100)
    assert_equal [100, 100, 200, 400, 300, 350, 325, 312.5], r.steps.map { |s| s[:rate] }
    assert_equal 300, r.rate
    # above the estimate a failure counts at once; the second failure counts too
    r = Oribi::Tune::Search.new(measure: ->(_, _) { { pass: false } }, max_steps: 10, confirm_below: 100).run(200)
    assert_equal [200, 100, 100, 50, 50], r.steps.map { |s| s[:rate] }.first(5)
  end

  def test_a_stop_sample_ends_the_search
    measure = ->(rate, step) { { pass: true, stop: step == 2 } }
    r = Oribi::Tune::Search.new(measure: measure, max_steps: 10).run(10)
    assert_equal [10, 20], r.steps.map { |s| s[:rate] }
    assert_equal 10, r.rate
  end

  def test_sample_of_the_best_rate_is_kept
    measure = ->(rate, _) { { pass: rate <= 50, p99: rate / 1000.0 } }
    r = Oribi::Tune::Search.new(measure: measure, tolerance: 0.1, max_steps: 10).run(40)
    assert_equal r.rate, r.sample[:rate]
    assert_equal r.rate / 1000.0, r.sample[:p99]
  end
end
