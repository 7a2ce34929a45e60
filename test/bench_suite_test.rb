# frozen_string_literal: true

require "minitest/autorun"
require "json"
require "rbconfig"
require "tmpdir"
require_relative "../bench/pin"
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require_relative "../bench/suite/process_group"
require_relative "support/process"

# bench/suite.rb's machinery without the peers (no bench/Gemfile): Oribi
# and the minimal C server (compiled by the suite) on hello world, both
# sockets and both modes, a table row for each with requests counted and no
# errors, the goals against the ceiling, and an SVG plot; two passes, each
# booting both servers again, and on a machine with two CPUs or more the
# servers and the load generator on CPUs of their own.
class BenchSuiteTest < Minitest::Test
  ROOT = File.expand_path("..", __dir__)

  def test_suite_runs_oribi_and_the_minimal_server
    Dir.mktmpdir("suite-test-") do |dir|
      svg = File.join(dir, "plot.svg")
      md = File.join(dir, "BENCH.md")
      json = File.join(dir, "runs.json")
      argv = [RbConfig.ruby, File.join(ROOT, "bench", "suite.rb"), "--servers", "oribi,minimal",
              "--workloads", "hello", "--transports", "unix,tcp", "--duration", "0.5",
              "--warmup", "0", "--repeat", "2", "--connections", "8", "--no-allocs", "--out", md, "--svg", svg,
              "--json", json]
      out, _, status = run_command(*argv, chdir: ROOT, merge: true, timeout: 60)
      assert status.success?, out
      assert_match(/about \d+ min \d+ s/, out) # the estimate, printed first
      assert_match(/servers on CPU 0, load on CPU 1/, out) if Bench::Pin.possible?
      cells = JSON.parse(File.read(json))["cells"]
      assert_equal 8, cells.size
      cells.each { |c| assert_equal 2, c["runs"].size, c } # one run per pass
      report = File.read(md)
      rows = report.lines.grep(/^\| (unix|tcp) \|/)
      %w[unix tcp].product(%w[keep-alive close], %w[oribi minimal]).each do |t, m, s|
        row = rows.find { |l| l.start_with?("| #{t} | #{m} | #{s == 'oribi' ? '**oribi**' : s} |") }
        assert row, "no row for #{t} #{m} #{s} in:\n#{report}"
        cols = row.split("|").map(&:strip)
        assert_operator cols[4].delete(",").to_i, :>, 0, row # req/s
        assert_equal "0", cols[9], row # errors
        # A server's CPU read as 0 means its serving processes were missed.
        assert_operator cols[11].delete(",").to_f, :>, 0, "CPU µs/req: #{row}"
      end
      assert_match(/^\| unix, connection per request: oribi \/ minimal C \| \d+\.\d\d \|/, report)
      assert_match(/Machine: .+ CPUs/, report)
      plot = File.read(svg)
      assert plot.start_with?("<svg"), plot[0, 100]
      assert_includes plot, "hello · unix · keep-alive"
      assert_operator plot.scan("<rect").size, :>, 8 # background and one bar per server and cell
    end
  end

  # A worker that leaves its parent's process group and session (as
  # Pitchfork's, children of a mold, do) still counts for the server's CPU
  # and RSS, and is stopped with it.
  def test_process_group_counts_the_whole_tree
    Dir.mktmpdir("suite-tree-") do |dir|
      ready = File.join(dir, "ready")
      script = <<~RUBY
        fork do
          Process.setsid
          t = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
          nil while Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - t < 0.3
          File.write(#{ready.inspect}, Process.pid.to_s)
          sleep
        end
        sleep
      RUBY
      group = Bench::Suite::ProcessGroup.new([RbConfig.ruby, "-e", script], env: {}, log: File.join(dir, "log"), chdir: dir)
      begin
        # its pid written
        assert wait_until(timeout: 20, interval: 0.05) { File.size?(ready) }, "the worker never burnt its CPU"
        worker = File.read(ready).to_i
        stats = group.stats
        assert_includes stats.keys, worker
        assert_operator stats[worker][0], :>=, 0.2, stats.inspect
        assert_operator stats[worker][1], :>, 0
      ensure
        group.stop
      end
      gone_by = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
      sleep 0.02 while process_alive?(worker) && Process.clock_gettime(Process::CLOCK_MONOTONIC) < gone_by
      refute process_alive?(worker), "the worker outlived stop" if worker
    end
  end
end
