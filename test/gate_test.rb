# frozen_string_literal: true

require "minitest/autorun"
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../oribi-bench/lib", __dir__))
require_relative "../bench/gate"

# bench/gate.rb's verdict on one cell, without running anything: a clear
# loss fails, noise does not.
class GateTest < Minitest::Test
  def loss?(base, cand, threshold: 0.7)
    base = base.map(&:to_f) # rates as the client reports them
    cand = cand.map(&:to_f)
    ratios = cand.zip(base).map { |c, b| c / b }
    Bench::Gate.loss?(ratios, base, cand, threshold)
  end

  def test_a_build_at_a_third_of_the_rate_fails
    assert loss?([30_000, 31_000, 29_000], [10_000, 11_000, 9_000])
  end

  def test_an_equal_build_passes
    refute loss?([30_000, 31_000, 29_000], [29_500, 31_200, 28_800])
  end

  # One round where the machine stalled the candidate is not a loss.
  def test_one_slow_round_does_not_fail
    refute loss?([30_000, 31_000, 29_000], [30_500, 9_000, 29_000])
  end

  # A typical round under the threshold, but a best run as good as the
  # baseline's: noise, not a loss.
  def test_a_best_run_at_the_baselines_rate_passes
    refute loss?([30_000, 30_000, 30_000, 30_000], [18_000, 19_000, 30_000, 20_000])
  end

  def test_the_threshold_is_the_bound
    refute loss?([10_000], [7_000])
    assert loss?([10_000], [6_999])
  end
end
