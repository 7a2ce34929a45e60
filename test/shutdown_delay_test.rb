# frozen_string_literal: true

require "test_helper"

# Lame-duck shutdown (shutdown_delay): on TERM a pod leaves its Service's
# endpoints while it is already stopping, and new connections still arrive
# for a few seconds. With shutdown_delay the server answers readiness 503 at
# once and goes on accepting and serving that long, then drains as without;
# without it the listeners close at once and those clients are refused.
class ShutdownDelayTest < Minitest::Test
  DELAY = 1.5
  EVERY = 0.01 # a client connects every 10 ms

  def setup
    @dir = Dir.mktmpdir("oribi-delay")
    @control = "unix://#{@dir}/control.sock"
  end

  def teardown
    @srv&.stop
    FileUtils.rm_rf(@dir)
  end

  def start(*args, workers: 2)
    control = workers.positive? ? ["--control", @control] : []
    @srv = ServerProcess.new("slow.ru", *control, *args, workers: workers, unix: false)
  end

  def readyz
    sock = UNIXSocket.new(@control.delete_prefix("unix://"))
    HTTPClient.request(sock, "/readyz").status
  ensure
    sock&.close
  end

  # A client making one request per new connection every 10 ms until
  # stop.call says so (asked before each connect), recording
  # [connect time, status or :refused or the error] into seen.
  def prober(seen, stop)
    Thread.new do
      until stop.call
        at = now
        begin
          s = @srv.tcp
          res = HTTPClient.request(s, "/", headers: { "Connection" => "close" })
          seen << [at, res ? res.status : :eof]
        rescue Errno::ECONNREFUSED
          seen << [at, :refused]
        rescue SystemCallError, IOError, Timeout::Error => e
          seen << [at, e.class]
        ensure
          s&.close
        end
        sleep [EVERY - (now - at), 0].max # the client's pace, not a synchronisation
      end
    end
  end

  # Starts the prober, and sends TERM once it was answered a few times;
  # returns [prober thread, TERM time (a one-element array filled then)].
  def probe_across_term(seen, stop)
    term = []
    thread = prober(seen, -> { stop.call(term.first) })
    assert wait_until { seen.count { |_, s| s == 200 } >= 3 }, "no answer before TERM: #{seen.inspect}\n#{@srv.log}"
    term << now
    Process.kill(:TERM, @srv.pid)
    [thread, term.first]
  end

  def test_with_a_delay_clients_connecting_across_term_are_all_served
    start("--shutdown-delay", DELAY.to_s)
    assert wait_until { readyz == 200 }, "not ready\n#{@srv.log}"
    # Connections made before the delay ends are never refused, however
    # slowly the machine runs: the listeners stay open at least that long.
    seen = []
    probes, term = probe_across_term(seen, ->(t) { t && now >= t + DELAY - 0.2 })
    assert wait_until(timeout: DELAY - 0.2) { readyz == 503 }, "readiness must turn 503 as soon as TERM is taken"
    ready_503_at = now
    probes.join
    after = seen.select { |at, _| at >= term }
    statuses = after.map(&:last).tally
    assert_operator after.size, :>=, 20, "too few probes after TERM to tell: #{statuses}"
    assert_equal({ 200 => after.size }, statuses, "probes after TERM with shutdown_delay #{DELAY}")
    assert after.any? { |at, _| at > ready_503_at }, "no request served while readiness said 503"
    status = @srv.wait_exit(DELAY + 20)
    assert status&.success?, "exit #{status.inspect}\n#{@srv.log}"
    assert_operator now - term, :>=, DELAY, "stopped before shutdown_delay had passed"
    assert_match(/TERM: readiness 503, serving #{DELAY} s more \(shutdown_delay\), then draining/, @srv.log)
    puts "\nwith shutdown_delay #{DELAY}: #{after.size} probes in the #{DELAY - 0.2} s after TERM, 0 refused"
  end

  # Without the delay (the default, as before) the same client is refused
  # once the listeners close, while the pod may still be among the
  # endpoints: what shutdown_delay is for. It probes until the server is
  # gone (at least as long as above).
  def test_without_a_delay_clients_connecting_after_term_are_refused
    start
    assert wait_until { readyz == 200 }, "not ready\n#{@srv.log}"
    seen = []
    gone = []
    probes, term = probe_across_term(seen, ->(t) { t && now >= t + DELAY - 0.2 && (gone.any? || now > t + 15) })
    gone << @srv.wait_exit(10)
    probes.join
    after = seen.select { |at, _| at >= term }
    refused = after.select { |_, s| s == :refused }
    refute_nil gone.first, "the server did not exit"
    refute_empty refused, "no refusal without shutdown_delay: #{after.map(&:last).tally}"
    first = refused.first.first - term
    puts "\nwithout shutdown_delay: #{refused.size} of #{after.size} probes refused after TERM, " \
         "the first #{(first * 1000).round} ms after it"
  end

  def test_a_lone_worker_delays_too
    start("--shutdown-delay", DELAY.to_s, workers: 0)
    seen = []
    probes, term = probe_across_term(seen, ->(t) { t && now >= t + DELAY - 0.2 })
    probes.join
    after = seen.select { |at, _| at >= term }
    assert_operator after.size, :>=, 20, "too few probes after TERM: #{after.size}"
    assert_equal({ 200 => after.size }, after.map(&:last).tally)
    status = @srv.wait_exit(DELAY + 20)
    assert status&.success?, "exit #{status.inspect}\n#{@srv.log}"
    assert_operator now - term, :>=, DELAY
  end

  # The operator who sends TERM again means it: no waiting out the delay.
  def test_a_second_term_during_the_delay_stops_at_once
    start("--shutdown-delay", "10", "--shutdown-timeout", "20")
    assert wait_until { readyz == 200 }, "not ready\n#{@srv.log}"
    Process.kill(:TERM, @srv.pid)
    assert wait_until { readyz == 503 }
    second = now
    Process.kill(:TERM, @srv.pid)
    refute_nil @srv.wait_exit(8), "still running 8 s after the second TERM (the delay is 10 s)\n#{@srv.log}"
    assert_operator now - second, :<, 8
  end

  def test_the_delay_must_leave_time_to_drain
    out = IO.popen([RbConfig.ruby, File.join(ROOT, "exe/oribi"), "--shutdown-delay", "30", "--shutdown-timeout", "25",
                    File.join(APPS, "slow.ru")], err: %i[child out], &:read)
    refute $?.success?
    assert_match(/shutdown_delay \(30\.0\) must be below shutdown_timeout \(25\.0\)/, out)
  end
end
