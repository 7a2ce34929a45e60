# frozen_string_literal: true

# Runs test files in parallel processes, one file per process:
#
#   ruby test/runner.rb [--jobs N] [--limit SECONDS] [--no-rerun] FILE...
#
# Each integration test already has its own port, socket and tmpdir, and
# most of a server test's time is spent waiting on its server, so files
# share the machine well. Those whose assertions rest on the machine being
# otherwise quiet (ALONE: rates, fairness ratios, tune's search, busy_poll's
# sleeps) run one at a time once the others are done. The longest files
# start first, by the times of the previous run (tmp/test-times), else by
# size.
#
# Prints a line per file as it ends, then the output of every file that
# failed, then one minitest summary line for the whole suite. A file that
# failed runs once more, alone: one that then passes is named FLAKY with
# its first output, and does not fail the run. Exits 1 when a file failed
# twice.
require "etc"
require "fileutils"
require "json"
require "optparse"
require "rbconfig"

class TestRunner
  # inherit_test: start_server takes a generation as booted after 1 s, and
  # a HUP every generation must outlast, which a busy machine stretches.
  # idle_cpu_test: busy_poll spares a sleep only when the client's next
  # request comes within its budget, which a busy machine stretches too.
  ALONE = %w[fairness_test.rb soak_test.rb tune_test.rb tune_scenario_test.rb bench_open_loop_test.rb slow_clients_test.rb
             inherit_test.rb idle_cpu_test.rb].freeze
  TIMES = File.expand_path("../tmp/test-times", __dir__)
  SUMMARY = /(\d+) runs, (\d+) assertions, (\d+) failures, (\d+) errors, (\d+) skips/

  Result = Struct.new(:file, :output, :ok, :seconds, :counts)

  def initialize(files, jobs, limit, reruns: true)
    @files = files
    @jobs = jobs
    @limit = limit
    @reruns = reruns
    @times = File.exist?(TIMES) ? JSON.parse(File.read(TIMES)) : {}
  end

  def run
    started = now
    alone, shared = @files.partition { |f| ALONE.include?(File.basename(f)) }
    puts "#{@files.size} test files, #{@jobs} at a time (#{alone.size} alone at the end)"
    results = run_pool(longest_first(shared), @jobs) + run_pool(alone, 1)
    results, @flaky = rerun(results) if @reruns
    report(results, now - started)
  end

  # A file that failed runs once more, alone on the machine, and its second
  # result stands. Both are printed: the first failure's output is kept,
  # marked, so a rare failure (a race, a hang) is seen and can be chased,
  # while a file that fails on a quiet machine too still fails the run.
  def rerun(results)
    failed = results.reject(&:ok)
    return [results, []] if failed.empty?

    puts "#{failed.size} failed file(s) once more, one at a time"
    again = failed.to_h { |r| [r.file, run_file(r.file).tap { |x| progress(x) }] }
    flaky = failed.select { |r| again[r.file].ok }
    [results.map { |r| again.fetch(r.file, r) }, flaky]
  end

  private

  def longest_first(files)
    files.sort_by { |f| -(@times[f] || File.size(f) / 1000.0) }
  end

  # Runs files with at most jobs at once; → their Results in the order they ended.
  def run_pool(files, jobs)
    queue = Queue.new
    files.each { |f| queue << f }
    queue.close # pop gives nil once it is empty
    results = Queue.new
    Array.new([jobs, files.size].min) do
      Thread.new do
        while (file = queue.pop)
          results << run_file(file).tap { |r| progress(r) }
        end
      end
    end.each(&:join)
    Array.new(results.size) { results.pop }
  end

  # A file that runs past @limit seconds is killed with its process group
  # (its servers too) and fails with what it printed so far: a hang ends
  # the run in a failure that names the file, not in the CI's time limit.
  def run_file(file)
    t = now
    reader, writer = IO.pipe
    pid = Process.spawn(RbConfig.ruby, "-Ilib", "-Itest", file, out: writer, err: writer, pgroup: true)
    writer.close
    output = +""
    drain = Thread.new { output << reader.read }
    timed_out = drain.join(@limit).nil?
    if timed_out
      Process.kill(:KILL, -pid)
      drain.join(5)
    end
    Process.wait(pid)
    ok = $?.success? && !timed_out
    reader.close
    output << "\n#{file}: killed after #{@limit} s (TEST_FILE_LIMIT)\n" if timed_out
    counts = output.scan(SUMMARY).last&.map(&:to_i)
    Result.new(file, output, ok && !counts.nil?, now - t, counts || [0, 0, 0, 0, 0])
  end

  def progress(r)
    runs, _, failures, errors, skips = r.counts
    mark = r.ok ? "ok  " : "FAIL"
    $stdout.puts format("%s %6.1f s  %-40s %d runs, %d failures, %d errors, %d skips",
                        mark, r.seconds, r.file, runs, failures, errors, skips)
    failures_in(r).each { |line| $stdout.puts "       #{line}" } unless r.ok
    $stdout.flush
  end

  # The failing tests of a file, a line each (name, place, first line of the
  # message), so that a log cut short still names them; the last lines of
  # the output when the file ended without a summary (a crash).
  def failures_in(result)
    found = result.output.scan(/^\s*\d+\) (?:Failure|Error):\n(\S+?)(?: \[([^\]\n]+)\])?:\n(.*)$/)
    return result.output.lines.last(5).map(&:chomp) if found.empty?

    found.map { |name, place, message| [name, place && "[#{place}]", message.strip[0, 160]].compact.join(" ") }
  end

  def report(results, wall)
    failed = results.reject(&:ok)
    @flaky.to_a.each { |r| puts "\n===== #{r.file} (failed, then passed when run again: FLAKY)\n#{r.output}" }
    failed.each { |r| puts "\n===== #{r.file}\n#{r.output}" }
    save_times(results)
    totals = results.map(&:counts).transpose.map(&:sum)
    totals = [0, 0, 0, 0, 0] if totals.empty?
    puts "\nFinished in #{wall.round(1)} s (#{results.sum(&:seconds).round(1)} s of files)" \
         "#{", flaky: #{@flaky.map(&:file).join(' ')}" unless @flaky.to_a.empty?}" \
         "#{", failed: #{failed.map(&:file).join(' ')}" unless failed.empty?}"
    puts format("%d runs, %d assertions, %d failures, %d errors, %d skips", *totals)
    failed.empty?
  end

  def save_times(results)
    FileUtils.mkdir_p(File.dirname(TIMES))
    File.write(TIMES, JSON.generate(@times.merge(results.to_h { |r| [r.file, r.seconds.round(1)] })))
  rescue SystemCallError
    nil # a read-only checkout runs as well, only not ordered next time
  end

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

if $PROGRAM_NAME == __FILE__
  jobs = Integer(ENV.fetch("TEST_JOBS", [Etc.nprocessors * 2, 4].min.to_s), 10)
  limit = Integer(ENV.fetch("TEST_FILE_LIMIT", "600"), 10)
  reruns = ENV["TEST_RERUN"] != "0"
  files = OptionParser.new do |o|
    o.banner = "Usage: ruby test/runner.rb [--jobs N] [--limit S] FILE..."
    o.on("-j", "--jobs N", Integer, "files run at once (default $TEST_JOBS or 2 per CPU, at most 4)") { |n| jobs = n }
    o.on("-l", "--limit S", Integer, "seconds a file may run before it is killed (default $TEST_FILE_LIMIT or 600)") do |s|
      limit = s
    end
    o.on("--[no-]rerun", "run a failed file once more, alone (default on; TEST_RERUN=0 turns it off)") { |r| reruns = r }
  end.parse(ARGV)
  exit(TestRunner.new(files, [jobs, 1].max, [limit, 1].max, reruns: reruns).run ? 0 : 1)
end
