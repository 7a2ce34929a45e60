# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../../lib", __dir__))
require "minitest/autorun"
require "oribi/tune"
require "stringio"

# How far `oribi tune` trusts its numbers, without a server: intervals from
# repeated runs, a busy machine read from /proc/stat snapshots, results
# that contradict each other, and the confidence the recommendation states.
class TuneNoiseTest < Minitest::Test
  Noise = Oribi::Tune::Noise
  Recommend = Oribi::Tune::Recommend
  TICK = Oribi::Tune::Resources::TICK

  def test_interval_is_students_t
    iv = Noise.interval([90.0, 100.0, 110.0])
    assert_in_delta 100.0, iv[:mean]
    assert_in_delta 4.30 * 10 / Math.sqrt(3), iv[:half], 1e-9 # sd 10, 2 degrees of freedom
    assert_equal 3, iv[:n]
    assert_nil Noise.interval([5.0])[:half]
    assert_nil Noise.interval([])
    assert_in_delta 0.0, Noise.interval([7.0, 7.0])[:half]
    assert_in_delta 2.086, Noise.t95(20), 0.01 # past the table, close to it
  end

  def test_rate_interval_is_the_bracket_widened_by_the_spread
    cap = { mean: 100.0, half: 10.0 } # ±10%
    lo, hi = Noise.rate_interval(200.0, 210.0, cap)
    assert_in_delta 180.0, lo
    assert_in_delta 231.0, hi
    assert_equal [200.0, 200.0], Noise.rate_interval(200.0, nil, { mean: 100.0, half: nil }) # no failing rate, one run
    assert_equal 0.0, Noise.rate_interval(10.0, 20.0, { mean: 1.0, half: 5.0 }).first # never below 0
  end

  # /proc/stat's cpu line: user nice system idle iowait irq softirq steal guest guest_nice (ticks)
  def stat(user, system, idle, steal: 0)
    user, system, idle, steal = [user, system, idle, steal].map(&:round)
    "cpu  #{user} 0 #{system} #{idle} 0 0 0 #{steal} #{user / 2} 0\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 1 2\n"
  end

  def test_machine_cpu_from_proc_stat
    m = Noise.machine(stat(300, 100, 600, steal: 20))
    assert_in_delta 400 / TICK, m[:busy] # guest is counted inside user, not twice
    assert_in_delta 20 / TICK, m[:steal]
    assert_in_delta 1020 / TICK, m[:total]
    # the real one parses too (none without /proc: test/platform_test.rb)
    assert_operator Noise.machine[:total], :>, 0 if Noise.detects?
  end

  # 2 CPUs for 1 s = 200 ticks at 100 Hz: others used what was busy less ours.
  def test_others_share_of_the_machine
    a = Noise.snapshot([], stat: stat(0, 0, 0), ours: 0.0)
    quiet = Noise.snapshot([], stat: stat(70 * TICK / 100, 10 * TICK / 100, 120 * TICK / 100), ours: 0.75)
    share = Noise.others(a, quiet)
    assert_in_delta 0.025, share[:others], 1e-9 # 0.8 s busy, 0.75 s ours: 0.05 s of 2 s
    refute Noise.busy?(share)
    noisy = Noise.snapshot([], stat: stat(150 * TICK / 100, 10 * TICK / 100, 40 * TICK / 100), ours: 0.75)
    share = Noise.others(a, noisy)
    assert_in_delta 0.425, share[:others], 1e-9 # a burner took most of a core
    assert Noise.busy?(share)
    stolen = Noise.snapshot([], stat: stat(80 * TICK / 100, 0, 100 * TICK / 100, steal: 20 * TICK / 100), ours: 0.8)
    assert Noise.busy?(Noise.others(a, stolen)) # no other process, but the hypervisor took 10%
    assert_nil Noise.others(a, a)
    refute Noise.busy?(nil)
  end

  def r(workers, threads, rate, status: :ok) = { workers: workers, threads: threads, rate: rate, status: status }

  # The run from the field: 1×4 190/s, 1×8 49/s and 2×4 64/s cannot all be true.
  def test_contradictions_name_the_lower_setting
    rs = [r(1, 1, 27), r(1, 4, 190), r(1, 8, 49), r(2, 1, 63), r(2, 4, 64), r(2, 8, 37)]
    found = Noise.contradictions(rs, cpus: 2)
    assert_equal [%w[1w×8t 1w×4t], %w[2w×4t 1w×4t]], found.map { |c| [Noise.name(c[:low]), Noise.name(c[:high])] }.sort
    assert_includes found.map { |c| c[:why] }, "1w×8t 49/s with more threads than 1w×4t at 190/s"
    # what a CPU-bound app does: no gain, a small loss; and workers past the CPUs may lose
    assert_empty Noise.contradictions([r(1, 1, 300), r(1, 8, 260), r(2, 1, 590), r(4, 1, 200)], cpus: 2)
    # a setting with no rate at all after one that passed fast is a contradiction; one that did not run is not
    assert_equal ["1w×4t no rate with more threads than 1w×1t at 20/s"],
                 Noise.contradictions([r(1, 1, 20), r(1, 4, nil, status: :slo), r(1, 8, nil, status: :boot)]).map { |c| c[:why] }
  end

  def ok(workers, threads, rate, lo, hi, rss, busy: 0.0)
    { workers: workers, threads: threads, status: :ok, rate: rate, interval: [lo, hi],
      memory: { total_rss: rss * 1_048_576 }, busy: { others: busy, steal: 0.0 } }
  end

  def confidence(rs, contradictions: [])
    Recommend.confidence(rs, Recommend.call(rs), contradictions: contradictions)
  end

  def test_confidence_high_when_quiet_tight_and_apart
    rs = [ok(1, 4, 100, 95, 105, 40), ok(2, 4, 200, 190, 212, 70), ok(2, 8, 300, 290, 318, 75)]
    assert_equal({ level: :high, reasons: [] }, confidence(rs))
  end

  def test_confidence_falls_with_a_busy_machine
    rs = [ok(1, 4, 100, 95, 105, 40, busy: 0.4), ok(2, 8, 300, 290, 318, 75)]
    c = confidence(rs)
    assert_equal :medium, c[:level] # busy, but not while the recommended setting ran
    assert_equal ["the machine was busy during 1 of 2 settings (other processes used up to 40% of the CPUs)"], c[:reasons]
    rs[1][:busy][:others] = 0.5
    assert_equal :low, confidence(rs)[:level]
  end

  def test_overlapping_intervals_and_contradictions
    rs = [ok(1, 4, 100, 60, 245, 40), ok(2, 4, 200, 150, 250, 70), ok(2, 8, 300, 240, 360, 75)]
    c = confidence(rs)
    assert_equal :none, c[:level] # 2 of 3 settings reach the best: no clear winner
    assert_includes c[:reasons], "1w×4t, 2w×4t cannot be told from the best (their intervals reach it)"
    rs = [ok(1, 4, 100, 95, 105, 40), ok(2, 4, 200, 190, 199, 70), ok(2, 8, 300, 200, 400, 75)]
    c = confidence(rs)
    assert_equal :medium, c[:level]
    assert_includes c[:reasons], "the recommended rate is known to ±33% only"
    rs = [ok(1, 4, 100, 95, 105, 40), ok(1, 8, 20, 19, 21, 41), ok(2, 8, 300, 290, 318, 75)]
    left = Noise.contradictions(rs)
    assert_equal :low, confidence(rs, contradictions: left)[:level] # not about the recommended setting
    assert_equal :none, confidence(rs, contradictions: [{ low: rs[0], high: rs[2], why: "x" }])[:level]
  end

  # A sweep whose settings are canned: 1×8 comes out at 49/s the first
  # time (a neighbour took the CPU) and 180/s when measured again.
  class CannedSession < Oribi::Tune::Session
    attr_reader :calls

    def initialize(o, rates)
      super(o, StringIO.new)
      @rates = rates
      @calls = []
    end

    private

    def setting(_o, s, _index, _total, _results, again: false)
      @calls << [s[:workers], s[:threads], again]
      rate = @rates[[s[:workers], s[:threads]]].shift
      s.merge(status: rate ? :ok : :slo, rate: rate, interval: rate && [rate * 0.95, rate * 1.05], busy: { others: 0.0, steal: 0.0 })
    end
  end

  def tune_canned(rates)
    o = Oribi::Tune::CLI.new(StringIO.new, StringIO.new).parse(["-w", "1", "-t", "1,4,8", File.expand_path("../../test/apps/io_bound.ru", __dir__)])
    session = CannedSession.new(o, rates)
    [session.run, session.calls]
  end

  def test_a_contradiction_is_measured_again_and_the_better_run_stands
    run, calls = tune_canned({ [1, 1] => [27], [1, 4] => [190], [1, 8] => [49, 180] })
    assert_equal [[1, 1, false], [1, 4, false], [1, 8, false], [1, 8, true]], calls # again, after the rest
    r = run[:results].last
    assert_equal [180, [49, 180]], [r[:rate], r[:remeasured]]
    assert_empty run[:contradictions]
    text = Oribi::Tune::Report.text(run)
    assert_includes text, "measured again: 49/s, then 180/s"
    # one setting's own two runs disagree: the machine is not quite to be trusted
    assert_includes text, "Confidence: medium: 1w×8t gave 49/s, then 180/s when measured again; "
  end

  def test_a_contradiction_left_is_reported_with_no_clear_winner
    run, = tune_canned({ [1, 1] => [27], [1, 4] => [190], [1, 8] => [49, 40] })
    r = run[:results].last
    assert_equal [49, [49, 40]], [r[:rate], r[:remeasured]] # the better of the two
    assert_equal ["1w×8t 49/s with more threads than 1w×4t at 190/s"], run[:contradictions].map { |c| c[:why] }
    never, = tune_canned({ [1, 1] => [27], [1, 4] => [190], [1, 8] => [nil, 150] })
    assert_includes Oribi::Tune::Report.text(never), "1w×8t gave no rate, then 150/s when measured again"
    text = Oribi::Tune::Report.text(run)
    assert_includes text, "No clear winner: measured twice, still contradictory: 1w×8t 49/s with more threads than 1w×4t at 190/s"
    refute_includes text, "Run it with"
  end
end
