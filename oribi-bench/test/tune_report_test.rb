# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../../lib", __dir__))
require "minitest/autorun"
require "stringio"
require "json"
require "oribi/tune"
require_relative "support/headless_chromium"

# `oribi tune` without a server: the recommendation, the SLO, the table,
# JSON and HTML renderings, and the command line.
class TuneReportTest < Minitest::Test
  MIB = 1024 * 1024
  Recommend = Oribi::Tune::Recommend

  def result(workers, threads, throughput, rss_mib, status: :ok)
    { workers: workers, threads: threads, status: status, rate: throughput && throughput * 1.02, throughput: throughput,
      interval: throughput && [throughput * 0.9995, throughput * 1.0505], busy: { others: 0.03, steal: 0.0 },
      latency: { p50: 0.01, p95: 0.02, p99: 0.03 }, cpu: 0.5,
      memory: { master_rss: 20 * MIB, master_pss: 15 * MIB, worker_rss: (rss_mib - 20) * MIB / workers,
                worker_pss: 10 * MIB, total_rss: rss_mib * MIB, total_pss: (rss_mib - 10) * MIB },
      steps: [{ rate: 100.0, throughput: 99.0, latency: { p99: 0.03 }, pass: true, why: nil },
              { rate: 200.0, throughput: 120.0, latency: { p99: 0.9 }, pass: false, why: "p99 900.0ms > 200.0ms" }] }
  end

  def pick(rec, key) = rec[key].values_at(:workers, :threads)

  def test_best_is_the_highest_throughput_within_the_slo
    rs = [result(1, 1, 100, 40), result(2, 1, 190, 60), result(2, 4, 400, 64), result(4, 8, nil, 100, status: :slo)]
    rec = Recommend.call(rs)
    assert_equal [2, 4], pick(rec, :best)
    assert_equal [2, 4], pick(rec, :cheapest)
  end

  def test_cheapest_within_five_percent_of_the_best
    rs = [result(4, 4, 400, 120), result(2, 8, 385, 70), result(3, 4, 390, 90), result(2, 4, 370, 60)]
    rec = Recommend.call(rs)
    assert_equal [4, 4], pick(rec, :best)
    assert_equal [2, 8], pick(rec, :cheapest) # 2×4 is cheaper but 7.5% slower
  end

  def test_equal_memory_goes_to_fewer_workers_times_threads
    rs = [result(2, 4, 600, 66), result(2, 1, 590, 64), result(1, 1, 330, 44)]
    rec = Recommend.call(rs)
    assert_equal [2, 4], pick(rec, :best)
    assert_equal [2, 1], pick(rec, :cheapest)
    # and among equal throughput, the best is the smaller setting too
    assert_equal [1, 1], pick(Recommend.call([result(1, 4, 300, 44), result(1, 1, 300, 44)]), :best)
  end

  def test_window_widens_to_the_search_tolerance
    rs = [result(2, 4, 400, 66), result(2, 1, 370, 64)]
    assert_equal [2, 4], pick(Recommend.call(rs), :cheapest)
    assert_equal [2, 1], pick(Recommend.call(rs, tolerance: 0.1), :cheapest) # 7.5% apart: not told apart at 10%
  end

  def test_memory_limit_excludes_settings
    rs = [result(4, 4, 400, 120), result(2, 4, 300, 70), result(1, 1, 100, 40)]
    rec = Recommend.call(rs, memory_limit: 100 * MIB)
    assert_equal [2, 4], pick(rec, :best)
    assert_nil Recommend.call(rs, memory_limit: 30 * MIB)
    assert_nil Recommend.call([result(1, 1, nil, 40, status: :slo)])
  end

  def test_projected_rss_from_the_same_threads
    rs = [result(1, 4, 100, 50), result(2, 4, 190, 80)] # 2 workers: 30 MiB each + 20 master
    assert_equal 20 * MIB + 30 * MIB * 4, Recommend.projected_rss(rs, 4, 4)
    assert_nil Recommend.projected_rss(rs, 4, 8)
  end

  def test_slo
    slo = Oribi::Tune::SLO.parse("p99=200ms, p50=20ms")
    assert_equal({ p99: 0.2, p50: 0.02 }, slo.limits)
    assert_equal "p99=200ms,p50=20ms", slo.to_s
    ok = { rate: 100.0, requests: 100, ok: 100, elapsed: 1.05, attack: 0.99, throughput: 95.2, latency: { p50: 0.01, p99: 0.1 } }
    assert_nil slo.violation(ok)
    assert_equal "1 of 100 failed", slo.violation(ok.merge(ok: 99))
    assert_equal "3 of 100 failed (timeout 2, connect 1)", slo.violation(ok.merge(ok: 97, errors: { timeout: 2, connect: 1, read: 0 }))
    # 100 requests at 100/s: served at 90/s or better, the last one's p50 aside
    assert_nil slo.violation(ok.merge(elapsed: 1.10)) # 99 / (1.10 - 0.01) = 90.8/s
    assert_equal "served 89/s of 100/s", slo.violation(ok.merge(elapsed: 1.12))
    assert_equal "served 86/s of 100/s", slo.violation(ok.merge(attack: 1.15)) # could not send on time
    assert_nil slo.violation(ok.merge(requests: 1, ok: 1, elapsed: 0.01, attack: 0.0))
    assert_equal "p99 250.0ms > 200.0ms", slo.violation(ok.merge(latency: { p50: 0.01, p99: 0.25 }))
    assert_equal "no responses", slo.violation(ok.merge(requests: 0, ok: 0))
    assert_equal "every answer was 404", slo.violation(ok.merge(ok: 0, statuses: { 404 => 100 }))
    assert_equal "7 of 100 failed (HTTP 500 ×5, timeout 2)",
                 slo.violation(ok.merge(ok: 93, statuses: { 200 => 93, 500 => 5 }, errors: { timeout: 2 }))
    assert_equal 2.0, Oribi::Tune::SLO.parse("p99.9=2s").limits[:p999]
    %w[p99 p98=1ms p99=fast].each { |bad| assert_raises(Oribi::Tune::SLO::Error) { Oribi::Tune::SLO.parse(bad) } }
  end

  def run_doc(limit: nil)
    rs = [result(1, 1, 100, 40), result(2, 4, 400, 64), result(4, 4, 410, 130, status: :memory),
          { workers: 4, threads: 8, status: :projected, note: "150.0MiB > 100.0MiB" }, result(1, 8, nil, 41, status: :slo)]
    { slo: Oribi::Tune::SLO.parse("p99=200ms"), path: "/", duration: 1.0, tolerance: 0.05, memory_limit: limit, results: rs }
  end

  def test_table_and_summary
    text = Oribi::Tune::Report.text(run_doc(limit: 100 * MIB))
    lines = text.lines
    assert_match(/\A\s*workers\s+threads\s+max rate\s+95% interval\s+throughput\s+p50\s+p95\s+p99\s+CPU\s+others\s+RSS\/worker\s+PSS\/worker\s+total RSS\s+note\n/, lines[0])
    assert_match(/^\s+2\s+4\s+408\/s\s+400–420\s+400\.0\/s\s+10\.0ms\s+20\.0ms\s+30\.0ms\s+50%\s+3%\s+22\.0MiB\s+10\.0MiB\s+64\.0MiB\s+best; recommended$/, text)
    assert_match(/^\s+4\s+4 .*130\.0MiB\s+over memory limit$/, text)
    assert_match(/^\s+4\s+8 .*skipped: projected over memory limit; 150\.0MiB > 100\.0MiB$/, text)
    assert_match(/^\s+1\s+8 .*no rate within SLO$/, text)
    assert_includes text, "Best throughput within the SLO (p99=200ms, total RSS ≤ 100.0MiB): 2 workers × 4 threads, 408 req/s"
    assert_includes text, "Run it with: oribi -w 2 -t 4\n"
    assert_includes Oribi::Tune::Report.text(run_doc.merge(results: [])), "No setting met the SLO"
  end

  def test_json_document
    d = JSON.parse(Oribi::Tune::Report.json(run_doc(limit: 100 * MIB)))
    assert_equal %w[slo path cpus duration_s tolerance memory_limit_bytes settings contradictions recommendation], d.keys
    s = d["settings"][1]
    assert_equal %w[workers threads status note max_rate rate_interval capacity throughput latency_ms cpu_percent
                    others_cpu_percent steal_percent busy remeasured memory_bytes steps], s.keys
    assert_equal [[399.8, 420.2], 3.0, false], [s["rate_interval"], s["others_cpu_percent"], s["busy"]]
    assert_equal [2, 4, "ok", 400.0, 30.0, 50.0], [s["workers"], s["threads"], s["status"], s["throughput"], s["latency_ms"]["p99"], s["cpu_percent"]]
    assert_equal %w[master_rss master_pss worker_rss worker_pss total_rss total_pss], s["memory_bytes"].keys
    assert_equal [{ "rate" => 100.0, "throughput" => 99.0, "p99_ms" => 30.0, "pass" => true, "why" => nil, "others_percent" => nil },
                  { "rate" => 200.0, "throughput" => 120.0, "p99_ms" => 900.0, "pass" => false, "why" => "p99 900.0ms > 200.0ms",
                    "others_percent" => nil }], s["steps"]
    assert_equal({ "workers" => 2, "threads" => 4, "max_rate" => 408.0, "throughput" => 400.0 }, d["recommendation"]["cheapest"])
    assert_equal ["high", []], d["recommendation"].values_at("confidence", "reasons")
    assert_equal "over memory limit", d["settings"][2]["status"]
    assert_equal "skipped: projected over memory limit", d["settings"][3]["status"]
  end

  def test_html_has_the_plots_and_fetches_nothing
    html = Oribi::Tune::Plot.html(run_doc(limit: 100 * MIB), title: "t <x>")
    %w[rate p99 cpu rss].each { |id| assert_includes html, %(<div class="chart" id="#{id}">) }
    assert_includes html, "uPlot" # inline, from lib/oribi/report/uplot
    assert_includes html, "t &lt;x&gt;"
    assert_includes html, "Run it with: oribi -w 2 -t 4"
    refute_match(/<script[^>]+src=|<link|(?:src|href)=["']?https?:|url\(["']?https?:/, html)
    data = JSON.parse(html[/const D = (.*);$/, 1])
    assert_equal 5, data["settings"].size
  end

  # The page as a reader opens it: every chart drawn (the marker the
  # script sets once each has drawn), nothing on the console, a screenshot.
  def test_html_draws_in_a_browser
    skip "no chromium on PATH" unless HeadlessChromium.available?

    Dir.mktmpdir("oribi-tune-html") do |dir|
      run = run_doc(limit: 100 * MIB).merge(cpus: 2)
      run[:results] << result(1, 4, 180, 42).merge(interval: [150.0, 200.0]) << result(2, 1, 150, 60)
      File.write(html = File.join(dir, "tune.html"), Oribi::Tune::Plot.html(run, title: "oribi tune test"))
      page = HeadlessChromium.render(html, png = File.join(dir, "tune.png"), height: 2000)
      assert_operator File.size(png), :>, 10_000
      assert_match(/<body[^>]* data-charts-drawn="yes"/, page.dom)
      assert_equal 4, page.dom.scan('class="uplot').size, page.dom[0, 2000]
      assert_empty page.console
      FileUtils.cp(png, ENV["TUNE_PNG"]) if ENV["TUNE_PNG"] # to look at it
    end
  end

  def parse(*argv) = Oribi::Tune::CLI.new(StringIO.new, StringIO.new).parse(argv)

  def app = File.expand_path("../../test/apps/io_bound.ru", __dir__)

  def test_command_line
    o = parse("-w", "1..3", "-t", "1,4,2", "--slo", "p95=50ms", "--memory-limit", "1.5G", "--quick", "-d", "2s", app)
    assert_equal [[1, 2, 3], [1, 2, 4], 2.0, 0.5, 5, 0.1], o.values_at(:workers, :threads, :duration, :warmup, :steps, :tolerance)
    assert_equal (1.5 * 1024**3).round, o[:memory_limit]
    assert_equal({ p95: 0.05 }, o[:slo].limits)
    d = parse(app)
    assert_equal [(1..Etc.nprocessors).to_a, [1, 2, 4, 8, 16], 5.0, 8, "/"], d.values_at(:workers, :threads, :duration, :steps, :path)
    assert_equal 512 * 1024 * 1024, Oribi::Tune.size("512M")
    assert_equal 1000, Oribi::Tune.size("1000")
    u = parse("--server", "unicorn", app)
    assert_equal [["unicorn"], [1]], [[u[:server]], u[:threads]] # one thread per worker unless -t says otherwise
    a = parse("--apply", "deploy {workers} {threads}", "--url", "http://127.0.0.1:3000/", "-w", "1..2", "-t", "4")
    assert_equal [[1, 4], [2, 4]], Oribi::Tune::Session.settings(a).map { |s| s.values_at(:workers, :threads) } # a sweep, unlike --url alone
    assert_equal [[nil, nil]], Oribi::Tune::Session.settings(parse("--url", "http://127.0.0.1:3000/")).map { |s| s.values_at(:workers, :threads) }
    assert_equal "deploy 2 8", Oribi::Tune::Server.fill(a[:apply], 2, 8)
  end

  # --json means what it means to oribi bench: the report on stdout, as
  # JSON; files come from -o DIR and --html FILE.
  def test_json_is_the_report_on_stdout
    cli = Oribi::Tune::CLI.new(StringIO.new, StringIO.new)
    run = { slo: Oribi::Tune::SLO.parse("p99=200ms"), path: "/", duration: 1.0, tolerance: 0.1, memory_limit: nil,
            results: [{ workers: 1, threads: 1, status: :slo, note: "x", steps: [] }], contradictions: [], cpus: 2,
            noise_detection: false, run_with: nil }
    assert_equal "json", parse("--json", app)[:format]
    assert_equal Oribi::Tune::Report.json(run), cli.report(parse("--json", app), run)
    assert_equal Oribi::Tune::Report.text(run), cli.report(parse(app), run)
    err = StringIO.new
    assert_equal 2, Oribi::Tune::CLI.run(["--json", "tune.json", app], out: StringIO.new, err: err)
    assert_equal "oribi tune: --json takes no FILE: it prints the JSON report; -o DIR writes DIR/tune.json\n", err.string
  end

  def test_bad_flags_give_one_line_and_exit_2
    [[], %w[-w 0 x.ru], %w[-t 1..x], %w[--slo p99], %w[--memory-limit lots], %w[--steps 1], ["--url", "http://x/", app],
     %w[--url http://x/ --unix-socket /x], %w[/nonexistent.ru], %w[--path x], %w[--bogus], ["--repeat", "1", app], ["--apply", "true", app],
     %w[--server puma --url http://x/], ["--server", "unicorn", "-t", "4", app], ["--server", "nginx", app],
     ["--targets", "/nonexistent", app], ["--targets", __FILE__, app]].each do |argv|
      out = StringIO.new
      err = StringIO.new
      assert_equal 2, Oribi::Tune::CLI.run(argv, out: out, err: err), argv.inspect
      assert_empty out.string
      assert_match(/\Aoribi tune: [^\n]+\n\z/, err.string, argv.inspect)
    end
  end

  def test_estimate_and_progress_line
    cli = Oribi::Tune::CLI.new(StringIO.new, StringIO.new)
    assert_equal "oribi tune: 4 settings × (boot, 0.5s warm-up, 3 × 0.5s capacity, ≤ 5 probes of 1s): about 47 s",
                 cli.estimate(parse("-w", "1..2", "-t", "1,4", "--quick", app))
    assert_match(/: about 9 min\z/, cli.estimate(parse("-w", "1..2", app)))
    assert_equal "[2/4] 1w×4t  probe 3/5  412/s  last p99 23.1ms",
                 Oribi::Tune::Progress.line("1w×4t", 2, 4, "probe 3/5", rate: 412.3, last_p99: 0.0231)
  end
end
