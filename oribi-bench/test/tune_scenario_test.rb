# frozen_string_literal: true

require_relative "../../test/test_helper"
require "json"
require "etc"

# `oribi tune` in the conditions it is for, through real processes: the
# hand-tuned Rails app's scenario (requests that wait on an upstream call
# and then burn some CPU), and a machine made busy on purpose by CPU
# burners this test starts and stops. Heavy (a minute or two each): in the
# runner's ALONE list.
class TuneScenarioTest < Minitest::Test
  def tune(*args)
    dir = Dir.mktmpdir("oribi-tune-scenario")
    cmd = [RbConfig.ruby, File.join(ROOT, "exe/oribi"), "tune", "--quick", *args, "-o", dir]
    out, err, status = run_command(*cmd, timeout: 300)
    assert_equal 0, status.exitstatus, "#{out}\n#{err}"
    { out: out, json: JSON.parse(File.read(File.join(dir, "tune.json")), symbolize_names: true),
      html: File.read(File.join(dir, "tune.html")) }
  ensure
    FileUtils.rm_rf(dir) if dir
  end

  # Each request waits 100 ms and burns 5 ms of CPU: a thread serves
  # ≈ 9.5 req/s, a worker at most 200 req/s (one core: the GVL). On 2 CPUs
  # the answer is 2 workers, with threads enough to cover the wait (≥ 8;
  # 1 × 32 is held to one core, 2 × 4 by its threads). The report shows
  # why: CPU per setting, p99 against threads, memory per worker. On a
  # machine too busy for that to show, tune must say so instead.
  def test_upstream_wait_and_cpu_on_two_cpus
    skip "needs 2 CPUs or more" if Etc.nprocessors < 2
    # procps' ps gives CPU time in whole seconds (BSD's in hundredths):
    # too coarse for one probe's CPU on Linux without /proc
    skip "CPU per setting needs /proc here (ORIBI_PORTABLE=1 reads ps)" unless Oribi::Platform.procfs?

    run = tune("-w", "1..2", "-t", "4,16,32", "--slo", "p99=500ms", File.join(APPS, "upstream.ru"))
    rec = run[:json][:recommendation]
    settings = run[:json][:settings]
    assert_match(/^Why, at the highest rate within the SLO:\n  1 worker: 4t \d+\/s \(p99 [\d.]+ms, CPU \d+%\) → 16t .* → 32t .*\n  2 workers: 4t .*\n  memory: each worker [\d.]+MiB RSS/, run[:out])
    assert_match(/\A\s*workers\s+threads\s+max rate\s+95% interval.*\bCPU\b.*RSS\/worker/, run[:out])
    assert_includes run[:html], %(<div class="chart" id="p99">)
    settings.select { |s| s[:workers] == 1 && s[:cpu_percent] }.each do |s|
      assert_operator s[:cpu_percent], :<=, 125, "one worker, one core (the GVL):\n#{run[:out]}" # ticks: ±10 ms
    end
    if [rec[:cheapest][:workers], rec[:cheapest][:threads] >= 8] == [2, true]
      assert_equal 2, rec[:best][:workers], run[:out]
    else
      assert_includes %w[low none], rec[:confidence], run[:out] # wrong, so it must not be sure
      assert_match(/the machine was busy during \d+ of 6 settings/, run[:out])
    end
  end

  # CPU burners, one per CPU, for the whole run: every setting is measured
  # on a busy machine, and tune says so and lowers its confidence.
  def test_a_noisy_neighbour_is_noticed
    skip "noise detection needs /proc (the Ruby side without it: ORIBI_PORTABLE=1)" unless Oribi::Platform.procfs?
    burners = Array.new(Etc.nprocessors) { Process.spawn(RbConfig.ruby, "-e", "loop { }", pgroup: true) }
    run = tune("-w", "1", "-t", "1,4", "--repeat", "2", "--slo", "p99=500ms", File.join(APPS, "io_bound.ru"))
    run[:json][:settings].each do |s|
      assert s[:busy], "#{s.inspect}\n#{run[:out]}"
      assert_operator s[:others_cpu_percent], :>=, 15, run[:out]
    end
    assert_match(/the machine was busy during 2 of 2 settings \(other processes used up to \d+% of the CPUs/, run[:out])
    assert_match(/^Confidence: low: |^No clear winner: /, run[:out])
    assert_match(/\d+%\s+\d+% busy\s/, run[:out]) # the table's others column
  ensure
    burners&.each do |pid|
      Process.kill(:KILL, pid)
      Process.wait(pid)
    rescue SystemCallError
      nil
    end
  end
end
