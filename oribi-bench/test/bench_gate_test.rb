# frozen_string_literal: true

require_relative "support/bench_cli"
require_relative "support/tiny_server"

# `--threshold` (exit 1 when one fails, for CI gates) and rate stages
# (`--rate 100:1s,300:1s`, ramps `0-200:2s`), against reference servers
# on threads of this process whose answers are known in advance.
class BenchGateTest < Minitest::Test
  DELAY = 0.02 # the fixed-delay server's answer time
  OK = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
  FAIL = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"

  include BenchCLIHelper

  # Every request answered after DELAY; every fourth (per connection) a 500.
  def serve(delay: DELAY, fail_every: nil, &block)
    handler = lambda do |sock, _head, i|
      sleep delay # the delay is what is measured, not a synchronisation
      sock.write(fail_every && (i % fail_every == fail_every - 1) ? FAIL : OK)
      :keep
    end
    TinyServer.serving(handler, &block)
  end

  # A duration as the report writes it (12.3ms, 1.34s, 850µs) in ms.
  def ms(text)
    m = text.match(/\A([\d.]+)(µs|us|ms|s)\z/) or flunk "not a duration: #{text}"
    value, unit = m.captures
    value.to_f * { "µs" => 0.001, "us" => 0.001, "ms" => 1, "s" => 1000 }.fetch(unit)
  end

  def test_latency_thresholds_pass_and_fail_on_a_fixed_delay
    serve do |url|
      rc, out, = bench("-n", "20", "-c", "1", "-T", "1", "--threshold", "p99<5ms", url)
      assert_equal 1, rc, out
      # The truth is ≥ 20 ms: the report says so and why it failed.
      line = out.lines.grep(/p99<5ms/).first
      assert_match(/FAILED/, line)
      assert_operator ms(line.split[1]), :>=, DELAY * 1000, line

      rc, out, = bench("-n", "20", "-c", "1", "-T", "1", "--threshold", "p99<2s,mean>=20ms,success>99.9%,errors<=0", url)
      assert_equal 0, rc, out
      assert_equal 4, out.lines.grep(/ ok$/).size, out
    end
  end

  def test_success_threshold_counts_error_statuses
    serve(delay: 0, fail_every: 4) do |url|
      rc, out, = bench("-n", "40", "-c", "1", "-T", "1", "--format", "json", "--threshold", "success>99.9%,success>=70%", url)
      assert_equal 1, rc
      th = JSON.parse(out)["thresholds"]
      assert_equal [["success>99.9%", 75.0, false], ["success>=70%", 75.0, true]],
                   th.map { |t| [t["threshold"], t["value"], t["ok"]] }
    end
  end

  def test_bad_thresholds_are_usage_errors
    ["p99<200", "p42<1ms", "success>99", "rate>5%", "p99~1ms", "errors<1ms"].each do |spec|
      rc, out, err = bench("-n", "1", "--threshold", spec, "http://127.0.0.1:9/")
      assert_equal 2, rc, spec
      assert_empty out
      assert_match(/\Aoribi bench: [^\n]*threshold/, err, spec)
    end
  end

  def test_rate_stages_parse
    parse = ->(*a) { Oribi::Bench::CLI.new(StringIO.new, StringIO.new).parse(a)[:run] }
    r = parse.("--rate", "0-100:2s,6000/m:1m", "http://x/")
    assert_equal [[0.0, 100.0, 2.0], [100.0, 100.0, 60.0]], r[:stages]
    assert_nil r[:duration]
    [%w[--rate 100:1s -d 5s http://x/], %w[--rate 0:1s http://x/], %w[--rate 100:0s http://x/],
     ["--rate", "100:1s,:2s", "http://x/"], ["--rate", "100:1s,", "http://x/"]].each do |argv|
      rc, _, err = bench(*argv)
      assert_equal 2, rc, argv.inspect
      assert_match(/\Aoribi bench: /, err)
    end
  end

  # Stages send exactly what they schedule: 100/s for 1 s then 300/s for
  # 1 s is 400 requests, 50 and 150 per half second by send time; a ramp
  # from 0 to 200/s over 2 s is 200, growing as t².
  def test_rate_stages_and_ramps_follow_the_schedule
    serve(delay: 0) do |url|
      port = url[/:(\d+)/, 1].to_i
      { [[100, 100, 1], [300, 300, 1]] => [50, 50, 150, 150],
        [[0, 200, 2]] => [13, 37, 63, 87],
        [[100, 100, 0.5], [0, 0, 0.5], [100, 100, 0.5]] => [50, 0, 50] }.each do |stages, halves|
        r = Timeout.timeout(20) do
          Oribi::Loadgen.run(host: "127.0.0.1", port: port, request: "GET / HTTP/1.1\r\nHost: t\r\n\r\n",
                             threads: 2, stages: stages, series_interval: 0.5, timeout: 5)
        end
        assert_equal halves.sum, r[:scheduled], stages.inspect
        assert_equal r[:scheduled], r[:requests] + r[:dropped]
        got = r[:series].map { |s| s[:count] + s[:errors] }
        # A send the busy machine could not make before the end is
        # dropped and missing from its half second, never misplaced.
        got.fill(0, got.size...halves.size)
        halves.zip(got).each { |want, n| assert_includes (want - r[:dropped])..want, n, "#{stages}: #{got}" }
      end
    end
  end

  def test_cli_stages_report_the_whole_schedule
    serve(delay: 0) do |url|
      rc, out, = bench("--rate", "50:1s,150:1s", "-T", "1", "--format", "json", url)
      assert_equal 0, rc
      j = JSON.parse(out)
      assert_equal 200, j["scheduled"]
      assert_equal 200, j["requests"] + j["dropped"]
    end
  end
end
