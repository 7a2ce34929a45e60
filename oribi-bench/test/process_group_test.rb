# frozen_string_literal: true

require_relative "../../test/test_helper"
require "minitest/mock"
require "oribi/process_group"

# Oribi::ProcessGroup on real processes: what it finds of a command's
# processes, and that stop leaves none behind, however they behave.
class ProcessGroupTest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir("oribi-pg")
  end

  def teardown
    @group&.stop(:KILL, timeout: 0)
    FileUtils.rm_rf(@dir)
  end

  # A ruby child running script (ARGV[0] is the tmpdir), its output in the log.
  def start(script, **opts)
    @group = Oribi::ProcessGroup.new([RbConfig.ruby, "-e", script, @dir], log: File.join(@dir, "log"), **opts)
  end

  def wait_for_log(text)
    assert wait_until(timeout: 10) { @group.log.include?(text) }, "never printed #{text}: #{@group.log}"
  end

  # A Pitchfork-like worker: forked, then in a session of its own, so out
  # of the group a KILL to the group reaches.
  def test_stop_kills_a_grandchild_that_left_the_group
    start(<<~RUBY)
      2.times { fork { sleep } }
      fork do
        fork do
          Process.setsid
          File.write(File.join(ARGV[0], "gone"), Process.pid.to_s)
          sleep
        end
        sleep
      end
      puts "forked"; $stdout.flush
      sleep
    RUBY
    assert wait_until(timeout: 10) { File.size?(File.join(@dir, "gone")) && @group.worker_pids.size == 3 } # its pid written
    gone = File.read(File.join(@dir, "gone")).to_i
    refute_equal @group.pid, File.read("/proc/#{gone}/stat").split(") ", 2)[1].split[2].to_i, "it left the group"
    assert_includes @group.members.keys, gone
    assert_equal 5, @group.stats.size, "the leader, its three children and the grandchild"
    wait_for_log("forked")
    assert_equal ["forked\n"], @group.tail(1)
    status = @group.stop
    assert_equal "TERM", Signal.signame(status.termsig)
    assert wait_until(timeout: 5) { !process_alive?(gone) }, "the grandchild outlived stop"
    assert_empty @group.worker_pids
  ensure
    Process.kill(:KILL, gone) if gone && process_alive?(gone)
  end

  # And what it forked meanwhile, unknown when stop began, goes with it
  # (the KILL to its group).
  def test_a_leader_that_ignores_term_is_killed_after_the_timeout
    start(<<~RUBY)
      term = false
      trap("TERM") { term = true }
      puts "trapped"; $stdout.flush
      sleep 0.01 until term
      fork { File.write(File.join(ARGV[0], "late"), Process.pid.to_s); sleep }
      sleep
    RUBY
    wait_for_log("trapped")
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    stopping = Thread.new { @group.stop(timeout: 1) }
    assert stopping.join(10), "stop never returned"
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t
    assert_operator took, :>=, 1, "TERM was given its time"
    assert_equal "KILL", Signal.signame(stopping.value.termsig)
    late = File.read(File.join(@dir, "late")).to_i
    assert wait_until(timeout: 5) { !process_alive?(late) }, "the process forked while it stopped outlived stop"
  ensure
    Process.kill(:KILL, -@group.pid) if stopping&.alive?
    Process.kill(:KILL, late) if late && process_alive?(late)
  end

  def test_stop_is_idempotent_and_returns_the_status
    start('trap("TERM") { exit 3 }; puts "trapped"; $stdout.flush; sleep')
    wait_for_log("trapped")
    status = @group.stop
    assert_equal 3, status.exitstatus
    assert_same status, @group.status
    # Its pid and group may be another's by now: a second stop signals nothing.
    again = Process.stub(:kill, ->(*args) { flunk "signalled again: #{args.inspect}" }) { @group.stop }
    assert_same status, again
  end

  def test_exited_once_it_ends_by_itself
    start("sleep 0.3; exit 7")
    refute @group.exited?
    assert_nil @group.reap(timeout: 0.05), "still running"
    assert process_alive?(@group.pid), "reap signals nothing"
    assert wait_until(timeout: 10) { @group.exited? }
    assert_equal 7, @group.status.exitstatus
    assert_same @group.status, @group.stop
  end

  # TERM to the group with group: true; to the leader alone by default (its
  # worker gets only the KILL that follows).
  def test_the_signal_goes_to_the_leader_or_the_group
    [false, true].each do |group|
      FileUtils.rm_f(Dir[File.join(@dir, "worker-*")])
      start(<<~RUBY)
        fork do
          trap("TERM") { File.write(File.join(ARGV[0], "worker-termed"), ""); exit }
          File.write(File.join(ARGV[0], "worker-trapped"), "")
          sleep
        end
        term = false
        trap("TERM") { term = true }
        sleep 0.01 until term
        Process.wait # its worker's end, if it got the TERM too
      RUBY
      assert wait_until(timeout: 10) { File.exist?(File.join(@dir, "worker-trapped")) }
      @group.stop(timeout: 1, group: group)
      assert_equal group, File.exist?(File.join(@dir, "worker-termed")), "group: #{group}"
    end
  end

  # env, chdir and other spawn options; stdout and stderr in one log, in
  # order; no stdin (a server must not hold the caller's terminal).
  def test_spawn_options_and_the_log
    script = 'echo "$X $(pwd)"; echo err >&2; ulimit -n; readlink /proc/$$/fd/0'
    @group = Oribi::ProcessGroup.new(["sh", "-c", script], log: File.join(@dir, "log"), env: { "X" => "x" }, chdir: @dir,
                                                          rlimit_nofile: 77)
    assert_equal 0, @group.reap(timeout: 10).exitstatus
    assert_equal "x #{File.realpath(@dir)}\nerr\n77\n/dev/null\n", @group.log
    assert_equal ["77\n", "/dev/null\n"], @group.tail(2)
  end

  # A group's id is its leader's pid, which the kernel hands out again once
  # the leader is reaped and the group is empty: stop, however late, must
  # not signal another group that has the number now. The next pid is set
  # through ns_last_pid so that a second group takes the first one's
  # number. Before: the late stop KILLed the other group (seen as a test's
  # shared server gone in the middle of a full run, where pids wrap).
  def test_a_late_stop_spares_the_group_that_took_its_number
    other = nil
    5.times do
      old = Oribi::ProcessGroup.new(["true"], log: File.join(@dir, "old"))
      assert_equal 0, old.reap(timeout: 10)&.exitstatus
      begin
        File.write("/proc/sys/kernel/ns_last_pid", (old.pid - 1).to_s)
      rescue SystemCallError => e
        skip "cannot choose the next pid: #{e.message}"
      end
      other = Oribi::ProcessGroup.new(["sleep", "30"], log: File.join(@dir, "other"))
      if other.pid == old.pid
        assert_empty old.members, "the other group counted as the old one's"
        old.stop(:KILL, timeout: 1)
        refute wait_until(timeout: 1) { other.exited? }, "stop of a reaped group KILLed the group that took its number"
        return
      end
      other.stop(:KILL, timeout: 1) # another process took the number first
    end
    skip "pids taken by other processes five times"
  ensure
    other&.stop(:KILL, timeout: 1)
  end
end
