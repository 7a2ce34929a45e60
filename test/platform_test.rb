# frozen_string_literal: true

require "test_helper"
require "oribi/fd_limit"
require "oribi/tune"

# Oribi::Platform: /proc on Linux, else one ps run (macOS, the BSDs).
# ORIBI_PORTABLE=1 takes the fallbacks on Linux too: here each one's answer
# about real processes is held to what /proc says of the same processes.
class PlatformTest < Minitest::Test
  Platform = Oribi::Platform
  Resources = Oribi::Tune::Resources
  GONE = (1 << 22) + 1 # above Linux's pid_max

  def setup
    @groups = []
  end

  def teardown
    @groups.each { |group| group.stop(:KILL, timeout: 0) }
  end

  # The block with ORIBI_PORTABLE set to value (nil: unset), in this process.
  def with_portable(value = "1")
    old = ENV.fetch("ORIBI_PORTABLE", nil)
    ENV["ORIBI_PORTABLE"] = value
    yield
  ensure
    ENV["ORIBI_PORTABLE"] = old
  end

  def via_ps(&) = with_portable("1", &)

  def via_proc(&)
    skip "no /proc to compare with" unless File.readable?("/proc/self/stat")
    with_portable(nil) do
      assert Platform.procfs?
      yield
    end
  end

  # A Ruby process running code in its own process group; → [pid, the
  # first line it prints, split].
  def spawn_ruby(code)
    r, w = IO.pipe
    @groups << (group = Oribi::ProcessGroup.new([RbConfig.ruby, "-e", "$stdout.sync = true; #{code}"], log: nil, out: w))
    w.close
    line = Timeout.timeout(30) { r.gets } or flunk "the child said nothing"
    [group.pid, line.split]
  ensure
    r&.close
  end

  def test_procfs_unless_portable
    via_ps { refute Platform.procfs? }
    with_portable("0") { assert_equal File.readable?("/proc/self/stat"), Platform.procfs? }
  end

  def test_ps_time_in_every_format
    {
      "00:00:00" => 0, "00:01:02" => 62, "01:02:03" => 3723, "1-02:03:04" => 93_784, "12-00:00:01" => 1_036_801, # procps
      "0:00.02" => 0.02, "1:02.50" => 62.5, "123:45.67" => 7425.67, # the BSDs, macOS
      "2:03" => 123, "1:00:00.25" => 3600.25
    }.each { |text, seconds| assert_in_delta seconds, Platform.ps_time(text), 1e-9, text }
    ["", "-", "12", "1:2:3:4", "a:00", "1-2:03"].each { |text| assert_nil Platform.ps_time(text), text }
  end

  # Two children asleep and one a zombie (not reaped): the two.
  def test_children_of_a_process_that_forked_two
    pid, kids = spawn_ruby("a, b = 2.times.map { fork { sleep } }; z = fork { exit! }; puts [a, b, z].join(' '); sleep")
    kids = kids.map(&:to_i)
    assert wait_until { Platform.processes([kids[2]])[kids[2]]&.state == "Z" }, "no zombie"
    via_ps { assert_equal kids.first(2).sort, Resources.children(pid) }
    via_proc { assert_equal kids.first(2).sort, Resources.children(pid) }
    rows = Platform.processes(kids)
    assert_equal kids.sort, rows.keys.sort
    assert_equal [pid] * 3, rows.values.map(&:ppid)
  end

  # procps shows whole seconds: at most one below /proc's ticks.
  def test_cpu_seconds_of_a_busy_child
    pid, = spawn_ruby("nil until Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) > 1.3; puts :done; sleep")
    ps = via_ps { Resources.cpu_seconds([pid]) }
    proc_cpu = via_proc { Resources.cpu_seconds([pid]) }
    assert_operator proc_cpu, :>=, 1.25 # (in ticks)
    assert_operator ps, :>=, 1.0
    assert_in_delta proc_cpu, ps, 1.0
    assert_equal ps, via_ps { Resources.cpu_seconds([pid, GONE]) }, "a pid gone counts for nothing"
  end

  def test_memory_and_rss_of_a_child
    pid, = spawn_ruby("s = 'x' * (64 << 20); puts s.size; sleep")
    ps = via_ps { Resources.memory(pid) }
    assert_nil ps[:pss], "ps knows no PSS"
    mine = via_proc { Resources.memory(pid) }
    assert_operator mine[:rss], :>, 64 << 20
    assert_in_delta 1.0, ps[:rss].fdiv(mine[:rss]), 0.1
    stats = via_ps { Oribi::Platform.rss(pid) }
    assert_in_delta 1.0, stats.fdiv(via_proc { Oribi::Platform.rss(pid) }), 0.1
    assert_equal({ pid => stats }, via_ps { Oribi::Platform.rss_of([pid, GONE]) })
    via_ps { assert_nil Resources.memory(GONE) }
  end

  # No ps, or no pid asked about: nothing, not an error.
  def test_without_ps_nothing_is_known
    assert_equal({}, Platform.processes([]))
    Dir.mktmpdir("oribi-no-ps") do |empty|
      old = ENV.fetch("PATH", nil)
      ENV["PATH"] = empty
      via_ps do
        assert_equal({}, Platform.processes)
        assert_empty Resources.children(Process.pid)
        assert_equal 0.0, Resources.cpu_seconds([Process.pid])
        assert_nil Oribi::Platform.rss(Process.pid)
        assert_nil Platform.sysctl("kern.maxfilesperproc")
      end
    ensure
      ENV["PATH"] = old
    end
  end

  # macOS refuses a soft fd limit above kern.maxfilesperproc.
  def test_nr_open_from_sysctl
    Dir.mktmpdir("oribi-sysctl") do |dir|
      File.write(File.join(dir, "sysctl"), "#!/bin/sh\n[ \"$*\" = '-n kern.maxfilesperproc' ] && echo 24576\n")
      File.chmod(0o755, File.join(dir, "sysctl"))
      old = ENV.fetch("PATH", nil)
      ENV["PATH"] = "#{dir}:#{old}"
      assert_equal 24_576, via_ps { Oribi::FdLimit.nr_open }
      ENV["PATH"] = dir
      File.write(File.join(dir, "sysctl"), "#!/bin/sh\nexit 1\n")
      assert_equal 1 << 20, via_ps { Oribi::FdLimit.nr_open }
    ensure
      ENV["PATH"] = old
    end
  end

  # The machine's CPU comes from /proc/stat only: without it no snapshot,
  # nothing marked busy, and the report says so once.
  def test_noise_detection_needs_proc
    noise = Oribi::Tune::Noise
    via_ps do
      refute noise.detects?
      assert_nil noise.machine
      assert_nil noise.snapshot([Process.pid])
    end
    r = { workers: 1, threads: 1, status: :ok, rate: 100.0, interval: [90.0, 110.0], latency: { p99: 0.01 },
          memory: { master_rss: 1 << 20, master_pss: nil, worker_rss: 1 << 20, worker_pss: nil, total_rss: 2 << 20, total_pss: nil } }
    run = { slo: Oribi::Tune::SLO.parse("p99=500ms"), results: [r], contradictions: [], cpus: 2 }
    text = Oribi::Tune::Report.text(run.merge(noise_detection: false))
    assert_equal 1, text.scan("noise detection needs /proc").size, text
    assert_includes text, "each worker 1.0MiB RSS, the master"
    refute_includes Oribi::Tune::Report.text(run.merge(noise_detection: true)), "noise detection"
  end
end
