# frozen_string_literal: true

require_relative "../../test/test_helper"
require "json"
require "pty"
require "oribi/tune/resources"
require "framework_process"

# `oribi tune` end to end: real servers (started by tune on unix sockets)
# for an IO-bound app (50 ms sleep) and a CPU-bound app (3 ms of CPU), a
# tiny sweep of workers 1..2 × threads 1,4 with short probes. Each tune
# runs once (about 30 s) and the tests share its result. Functional
# properties only, with margins for a noisy shared 2-core box.
class TuneTest < Minitest::Test
  ARGS = %w[--quick -w 1..2 -t 1,4 --slo p99=500ms].freeze
  @@runs = {} # rubocop:disable Style/ClassVars -- one tune per app, shared by the tests

  def tune(app)
    @@runs[app] ||= begin
      dir = Dir.mktmpdir("oribi-tune-test")
      cmd = [RbConfig.ruby, File.join(ROOT, "exe/oribi"), "tune", *ARGS, "-o", dir, File.join(APPS, app)]
      out, err, status = run_command(*cmd, timeout: 120)
      assert_equal 0, status.exitstatus, "#{out}\n#{err}"
      { out: out, err: err, json: JSON.parse(File.read(File.join(dir, "tune.json")), symbolize_names: true),
        html: File.read(File.join(dir, "tune.html")), txt: File.read(File.join(dir, "tune.txt")) }
    ensure
      FileUtils.rm_rf(dir) if dir
    end
  end

  def setting(run, w, t) = run[:json][:settings].find { |s| s[:workers] == w && s[:threads] == t }
  def recommended(run) = run[:json][:recommendation][:cheapest]
  def concurrency(s) = s[:workers] * s[:threads]

  # Whether this build runs the app on several threads per worker (the
  # rack.multithread flag the server sets truthfully).
  def threads_work?
    return @@runs[:threads] if @@runs.key?(:threads)

    server = ServerProcess.new("io_bound.ru", "-t", "4", workers: 1, tcp: false)
    s = server.unix
    s.write("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    @@runs[:threads] = HTTPClient.read_response(s).body.include?("multithread=true")
  ensure
    s&.close
    server&.stop
  end

  def test_every_setting_is_measured_and_reported
    run = tune("io_bound.ru")
    assert_match(/\Aoribi tune: 4 settings × .*: about \d+ s$/, run[:err])
    assert_equal run[:out], run[:txt]
    assert_match(/^Recommended \(least memory within \d+% of the best\): \d workers? × \d threads?, /, run[:out])
    settings = run[:json][:settings]
    assert_equal [[1, 1], [1, 4], [2, 1], [2, 4]], settings.map { |s| [s[:workers], s[:threads]] }
    settings.each do |s|
      assert_equal "ok", s[:status], s.inspect
      assert_operator s[:steps].size, :<=, 5
      assert s[:steps].any? { |st| st[:pass] }, s.inspect
      # the reported rate is the highest that passed; the bisection tried one above it
      assert_equal s[:steps].select { |st| st[:pass] }.map { |st| st[:rate] }.max, s[:max_rate]
      assert_operator s[:latency_ms][:p99], :<=, 500
      assert_operator s[:latency_ms][:p50], :>=, 49 # the app sleeps 50 ms
      m = s[:memory_bytes]
      assert_operator m[:worker_rss], :>, 5 * 1024 * 1024
      if Oribi::Platform.procfs?
        assert_operator m[:worker_pss], :<=, m[:worker_rss]
      else
        assert_nil m[:worker_pss] # ps knows no PSS
      end
      assert_equal m[:total_rss] > m[:master_rss] + (s[:workers] - 1) * m[:worker_rss], true
      assert_operator s[:cpu_percent], :>=, 0 # an app asleep uses next to none
    end
    %w[rate p99 cpu rss].each { |id| assert_includes run[:html], %(<div class="chart" id="#{id}">) }
    assert_equal Oribi::Platform.procfs?, !run[:out].include?("noise detection needs /proc")
  end

  # Not dependent on threads: an IO-bound app gains from concurrency, so
  # 2 workers serve about twice what 1 does and are recommended.
  def test_io_bound_gains_from_concurrency
    run = tune("io_bound.ru")
    one = setting(run, 1, 1)[:throughput]
    assert_operator one, :>=, 6 # ≈ 20 req/s ideal at 50 ms a request
    assert_operator setting(run, 2, 1)[:throughput], :>=, 1.5 * one, run[:out]
    assert_equal 2, recommended(run)[:workers], run[:out]
    assert_operator recommended(run)[:throughput], :>=, 1.5 * one, run[:out]
  end

  # Threads are recommended for the IO-bound app, and it gains far more from
  # them than the CPU-bound one. Needs threads per worker (skipped without:
  # 1×4 then behaves as 1×1 and the sweep tells workers apart only,
  # asserted above). The CPU-bound app may still gain somewhat from threads
  # under an open-loop load: with one thread, a keep-alive connection waits
  # for its own busy worker while the other may be idle (measured: 2×4
  # about 1.5× 2×1 on this box), so its recommendation can be 2×4 too; the
  # direction shows in the gain and in the recommendation never having
  # fewer threads for the IO-bound app.
  def test_io_bound_gets_more_threads_than_cpu_bound
    io = tune("io_bound.ru")
    cpu = tune("cpu_bound.ru")
    skip "threads per worker not in this build (rack.multithread is false with -t 4)" unless threads_work?

    assert_operator setting(io, 1, 4)[:throughput], :>=, 2 * setting(io, 1, 1)[:throughput], io[:out]
    assert_equal 4, recommended(io)[:threads], io[:out]
    assert_operator recommended(io)[:threads], :>=, recommended(cpu)[:threads]
    gain = ->(run) { setting(run, 2, 4)[:throughput] / setting(run, 2, 1)[:throughput] }
    assert_operator gain.(io), :>, 1.5 * gain.(cpu), "IO-bound:\n#{io[:out]}\nCPU-bound:\n#{cpu[:out]}"
  end

  # A CPU-bound app: each request costs its 3 ms of CPU, and a worker
  # cannot serve more than one core's worth whatever its threads (the
  # GVL): at most 1/3 ms ≈ 333 req/s per worker, however many threads.
  def test_cpu_bound_is_bounded_by_cpu
    run = tune("cpu_bound.ru")
    io = tune("io_bound.ru")
    per_request = ->(s) { s[:cpu_percent] / 100.0 / s[:throughput] }
    # what tells the two apps apart, noise or not: CPU time per request
    assert_operator per_request.(setting(io, 1, 1)), :<, per_request.(setting(run, 1, 1)) / 3, "#{io[:out]}\n#{run[:out]}"
    run[:json][:settings].each do |s|
      assert_operator s[:cpu_percent] / 100.0 / s[:throughput], :>=, 0.002, run[:out] # CPU seconds per request (ticks: ±10 ms)
      assert_operator s[:max_rate], :<=, s[:workers] * 1.25 / 0.003, run[:out] # margin: keep-up slack, clock
    end
  end

  # On a terminal: the live line (setting, probe, rate, last p99); Ctrl-C
  # stops the probe and the server, and still prints the table.
  def test_progress_line_and_ctrl_c
    PTY.spawn(RbConfig.ruby, File.join(ROOT, "exe/oribi"), "tune", "--quick", "-d", "400ms", "--steps", "20",
              "--tolerance", "0.1", "-w", "1", "-t", "1,2", File.join(APPS, "io_bound.ru")) do |r, _w, pid|
      seen = +""
      master = nil
      Timeout.timeout(40) do
        seen << r.readpartial(4096).force_encoding("UTF-8") until seen.match?(%r{\[1/2\] 1w×1t  probe 2/20  \d+/s  last p99 [\d.]+ms})
        master = Oribi::Tune::Resources.children(pid).first
        Process.kill(:INT, pid)
        loop { seen << r.readpartial(4096).force_encoding("UTF-8") }
      rescue Errno::EIO, EOFError
        nil # the pty closes when the process is gone
      end
      _, st = Process.wait2(pid)
      assert_equal 1, st.exitstatus, seen # nothing completed, nothing recommended
      assert_match(/\e\[Kworkers  threads/, seen) # the line erased, then the table
      assert_match(/^\s+1\s+1 .*interrupted\r?$/, seen)
      assert_match(/^\s+1\s+2 .*interrupted\r?$/, seen)
      assert master, seen
      assert_raises(Errno::ESRCH) { Process.kill(0, master) } # the server is gone
    end
  end

  # --unix-socket against a running server: only the rate search, for that one
  # setting; no memory (tune did not start it).
  # An app that answers 404 at / (a Rails app's root, often): the report
  # says so, and how to point tune at a real page.
  def test_every_answer_an_error_is_explained
    server = ServerProcess.new("responses.ru", workers: 1, tcp: false)
    cmd = [RbConfig.ruby, File.join(ROOT, "exe/oribi"), "tune", "--quick", "--unix-socket", server.sock, "--path", "/status?code=404"]
    out, err, status = run_command(*cmd, timeout: 60)
    assert_equal 1, status.exitstatus, "#{out}\n#{err}"
    assert_match(%r{every answer was 404 for GET /status\?code=404: pass --path}, out)
  ensure
    server&.stop
  end

  def test_against_a_running_server
    server = ServerProcess.new("io_bound.ru", workers: 1, tcp: false)
    cmd = [RbConfig.ruby, File.join(ROOT, "exe/oribi"), "tune", "--quick", "--unix-socket", server.sock]
    out, err, status = run_command(*cmd, timeout: 60)
    assert_equal 0, status.exitstatus, err
    assert_match(/^\s+-\s+-\s+\d+\/s\s+\d+–\d+\s+[\d.]+\/s\s+[\d.]+ms .* best; recommended$/, out)
    assert_match(/^Confidence: \w+/, out) # no busy check: tune knows none of the server's processes
    assert_match(/^Recommended \(least memory within 10% of the best\): the server, \d+ req\/s/, out)
    refute_includes out, "Run it with"
  ensure
    server&.stop
  end

  # --targets: the load is the file's mix (a GET with a header, a POST with
  # a body), on the server tune started. The app answers 404 to anything
  # else, so a run of GET / would fail every probe.
  def test_targets_mix_endpoints_bodies_and_headers
    Dir.mktmpdir("oribi-tune-targets") do |dir|
      File.write(app = File.join(dir, "shop.ru"), <<~RUBY)
        run lambda { |env|
          ok = case [env["REQUEST_METHOD"], env["PATH_INFO"]]
               when ["GET", "/items"] then env["HTTP_X_KEY"] == "k1"
               when ["POST", "/orders"] then env["rack.input"].read == "item=7"
               end
          File.write(ENV.fetch("SHOP_LOG"), "\#{env["REQUEST_METHOD"]} \#{env["PATH_INFO"]}\n", mode: "a") if ok
          [ok ? 200 : 404, { "content-type" => "text/plain" }, ["ok\n"]]
        }
      RUBY
      File.write(File.join(dir, "order.txt"), "item=7")
      File.write(targets = File.join(dir, "targets"), <<~TXT)
        # two endpoints of the shop
        GET http://shop.test/items
        X-Key: k1

        POST http://shop.test/orders
        Content-Type: application/x-www-form-urlencoded
        @order.txt
      TXT
      log = File.join(dir, "log")
      cmd = [RbConfig.ruby, File.join(ROOT, "exe/oribi"), "tune", "--quick", "-w", "1", "-t", "2", "--targets", targets, app]
      out, err, status = run_command(*cmd, env: { "SHOP_LOG" => log }, timeout: 60)
      assert_equal 0, status.exitstatus, "#{out}\n#{err}"
      seen = File.readlines(log, chomp: true).tally
      assert_equal ["GET /items", "POST /orders"], seen.keys.sort
      assert_in_delta seen["GET /items"], seen["POST /orders"], seen.values.sum / 100 + 2 # sent in turn
    end
  end

  # The recommendation, and the command to run it with; when tune cannot
  # tell the settings apart (a machine busy with other work, overlapping
  # intervals) it names the setting but gives no command, saying why
  # (docs/TUNE.md), which is right there too.
  def assert_run_it_with(out, recommended, command)
    assert_match(recommended, out)
    if out.include?("No clear winner: ")
      refute_match(/^Run it with:/, out)
    else
      assert_match(command, out)
    end
  end

  # --apply: the user's command restarts the server with each setting
  # ({workers} and {threads} replaced), tune probes --url after it.
  def test_apply_runs_the_users_command_per_setting
    Dir.mktmpdir("oribi-tune-apply") do |dir|
      port = free_port
      pid = File.join(dir, "pid")
      exe = [RbConfig.ruby, File.join(ROOT, "exe/oribi")].join(" ")
      restart = "if [ -f #{pid} ]; then kill $(cat #{pid}); while kill -0 $(cat #{pid}) 2>/dev/null; do sleep 0.05; done; fi; " \
                "echo {workers}x{threads} >> #{dir}/applied; " \
                "#{exe} -w {workers} -t {threads} --pid #{pid} -b tcp://127.0.0.1:#{port} #{File.join(APPS, 'io_bound.ru')} > #{dir}/log 2>&1 &"
      cmd = [RbConfig.ruby, File.join(ROOT, "exe/oribi"), "tune", "--quick", "-w", "1..2", "-t", "2", "--slo", "p99=500ms",
             "--apply", restart, "--url", "http://127.0.0.1:#{port}/", "-o", dir]
      out, err, status = run_command(*cmd, timeout: 120)
      assert_equal 0, status.exitstatus, "#{out}\n#{err}"
      assert_equal %w[1x2 2x2], File.readlines(File.join(dir, "applied"), chomp: true).first(2)
      settings = JSON.parse(File.read(File.join(dir, "tune.json")), symbolize_names: true)[:settings]
      assert_equal [[1, 2, "ok"], [2, 2, "ok"]], settings.map { |s| s.values_at(:workers, :threads, :status) }
      assert_operator settings[1][:max_rate], :>, settings[0][:max_rate] * 1.3, out # 2 workers: twice the threads asleep
      assert_run_it_with(out, /^Recommended .*: 2 workers × 2 threads/, /^Run it with: .*-w 2 -t 2 --pid /)
    ensure
      Process.kill(:TERM, File.read(pid).to_i) if pid && File.exist?(pid)
    end
  end

  # --server puma: the same sweep on Puma, with the command to run it.
  def test_server_puma
    FrameworkProcess.require_gem(self, "puma")
    cmd = [RbConfig.ruby, File.join(ROOT, "exe/oribi"), "tune", "--quick", "--server", "puma", "-w", "1", "-t", "1,4",
           "--slo", "p99=500ms", File.join(APPS, "io_bound.ru")]
    out, err, status = run_command(*cmd, timeout: 90)
    assert_equal 0, status.exitstatus, "#{out}\n#{err}"
    assert_run_it_with(out, /^Recommended .*: 1 worker × 4 threads/, /^Run it with: puma -w 1 -t 4:4$/)
    assert_match(/^\s+1\s+4\s+\d+\/s .*\d+\.\dMiB/, out) # memory measured on Puma's worker too
  end
end
