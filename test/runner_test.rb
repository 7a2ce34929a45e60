# frozen_string_literal: true

require "minitest/autorun"
require "rbconfig"
require "tmpdir"

# test/runner.rb, the suite's own runner: a file that hangs is killed with
# its children at the limit and reported as a failure naming it.
class RunnerTest < Minitest::Test
  RUNNER = File.expand_path("runner.rb", __dir__)

  # A file that fails once and then passes (a rare race) is named FLAKY,
  # with its first failure, and the run passes; one that fails twice fails it.
  def test_a_failed_file_runs_once_more_and_is_named_flaky_when_it_passes
    Dir.mktmpdir do |dir|
      flaky = File.join(dir, "flaky_test.rb")
      File.write(flaky, <<~RUBY)
        require "minitest/autorun"
        class FlakyTest < Minitest::Test
          def test_second_time
            marker = #{File.join(dir, 'ran').inspect}
            first = !File.exist?(marker)
            File.write(marker, "")
            refute first, "the first run fails"
          end
        end
      RUBY
      broken = File.join(dir, "broken_test.rb")
      File.write(broken, "require 'minitest/autorun'\nclass BrokenTest < Minitest::Test\n  def test_no = flunk('always')\nend\n")
      run = ->(*files) { IO.popen([RbConfig.ruby, RUNNER, *files, err: %i[child out]], chdir: File.expand_path("..", __dir__), &:read) }

      out = run.call(flaky)
      assert $?.success?, out
      assert_match(/^===== .*flaky_test\.rb \(failed, then passed when run again: FLAKY\)\n.*the first run fails/m, out)
      assert_match(/flaky: .*flaky_test\.rb$/, out)
      out = run.call(broken)
      refute $?.success?, out
      assert_equal 2, out.scan(/^FAIL .*broken_test\.rb/).size, out
    end
  end

  def test_a_file_past_the_limit_is_killed_with_its_children_and_fails
    Dir.mktmpdir do |dir|
      pidfile = File.join(dir, "child.pid")
      hang = File.join(dir, "hang_test.rb")
      File.write(hang, <<~RUBY)
        child = Process.spawn("sleep", "300")
        File.write(#{pidfile.inspect}, child.to_s)
        $stdout.puts "started the child"
        $stdout.flush
        sleep 300
      RUBY
      ok = File.join(dir, "ok_test.rb")
      File.write(ok, "require 'minitest/autorun'\nclass OkTest < Minitest::Test\n  def test_ok = assert(true)\nend\n")
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      out = IO.popen({ "TEST_FILE_LIMIT" => "2" }, [RbConfig.ruby, RUNNER, "--jobs", "2", hang, ok, err: %i[child out]],
                     chdir: File.expand_path("..", __dir__), &:read)
      seconds = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started

      refute $?.success?, out
      assert_operator seconds, :<, 60, out
      assert_match(/^FAIL .*hang_test\.rb/, out)
      assert_match(/hang_test\.rb: killed after 2 s/, out)
      assert_match(/started the child/, out)
      assert_match(/^ok .*ok_test\.rb\s+1 runs/, out)
      child = Integer(File.read(pidfile))
      gone = 50.times.any? do
        Process.kill(0, child)
        sleep 0.1
        false
      rescue Errno::ESRCH
        true
      end
      assert gone, "the hung file's child #{child} outlived it"
    end
  end
end
