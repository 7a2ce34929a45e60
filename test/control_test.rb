# frozen_string_literal: true

require "test_helper"
require "json"
require "minitest/mock"
require "rack/utils"

# The control endpoint (docs/CONTROL.md): stats through the scoreboard,
# readiness, restart and stop, and `oribi ctl`.
class ControlTest < Minitest::Test
  TOKEN = "s3cret-token"

  def start(*args, workers: 2, control: :unix, **kw)
    @dir = Dir.mktmpdir("oribi-control")
    @control = control == :unix ? "unix://#{@dir}/control.sock" : "tcp://127.0.0.1:#{free_port}"
    extra = control == :unix ? [] : ["--control-token", TOKEN]
    @srv&.stop
    @srv = ServerProcess.new("stats.ru", "--control", @control, *extra, *args, workers: workers, **kw)
    assert wait_until { control_socket.close || true rescue false }, "no control endpoint" # rubocop:disable Style/RescueModifier
  end

  def teardown
    @srv&.stop
    FileUtils.rm_rf(@dir) if @dir
  end

  def control_socket
    kind, host, port = Oribi::Listeners.parse(@control)
    kind == :unix ? UNIXSocket.new(host) : TCPSocket.new(host, port)
  end

  def control(path, method: "GET", headers: {})
    sock = control_socket
    HTTPClient.request(sock, path, method: method, headers: headers)
  ensure
    sock&.close
  end

  def stats
    res = control("/stats")
    assert_equal 200, res.status, res.body
    JSON.parse(res.body)
  end

  def get(path = "/", sock: @srv.tcp, headers: { "Connection" => "close" })
    HTTPClient.request(sock, path, headers: headers)
  end

  def ctl(*args)
    out = IO.popen([RbConfig.ruby, File.join(ROOT, "exe/oribi"), "ctl", *args, "--control", @control], err: %i[child out], &:read)
    [$?.exitstatus, out]
  end

  def test_stats_count_requests_per_worker
    start
    assert wait_until { control("/readyz").status == 200 }
    pids = Hash.new(0)
    20.times { pids[get.body.split.first.to_i] += 1 }
    s = nil # served is counted once the response is out: the client may be first
    assert wait_until { (s = stats)["requests_total"] == 20 }, "requests_total #{s && s['requests_total']}"
    served = s["workers"].to_h { |w| [w["pid"], w["served"]] }
    assert_equal pids, served.reject { |_, n| n.zero? }
    assert_equal 2, s["workers_booted"]
    assert s["workers"].all? { |w| w["rss"].positive? && !w["busy"] }
    assert_equal 20, s["queue_time"]["count"]
    assert_equal 20, s["queue_time"]["buckets"]["+Inf"]
    refute_nil s["workers"].max_by { |w| w["served"] }["last_request_at"]
  end

  # Without /proc (ORIBI_PORTABLE=1 takes that path here): the workers' rss
  # from one ps run per /stats (a ps on PATH that notes its arguments),
  # about what /proc says of them.
  def test_stats_rss_without_proc
    Dir.mktmpdir("oribi-ps") do |bin|
      real = ENV.fetch("PATH").split(":").map { |d| File.join(d, "ps") }.find { |f| File.executable?(f) }
      File.write(File.join(bin, "ps"), "#!/bin/sh\necho \"$*\" >> #{bin}/calls\nexec #{real} \"$@\"\n")
      File.chmod(0o755, File.join(bin, "ps"))
      start(env: { "ORIBI_PORTABLE" => "1", "PATH" => "#{bin}:#{ENV.fetch('PATH')}" })
      assert wait_until { control("/readyz").status == 200 && stats["workers_booted"] == 2 }
      calls = -> { File.exist?("#{bin}/calls") ? File.readlines("#{bin}/calls") : [] }
      before = calls.().size
      workers = stats["workers"]
      ps = calls.()[before..]
      assert_equal ["-o pid=,ppid=,stat=,rss=,time= -p #{workers.map { |w| w['pid'] }.join(',')}\n"], ps
      workers.each do |w|
        assert_operator w["rss"], :>, 1 << 20, w
        next unless File.readable?("/proc/#{w['pid']}/statm")

        statm = File.read("/proc/#{w['pid']}/statm").split[1].to_i * Oribi::Platform::PAGE
        assert_in_delta 1.0, w["rss"].fdiv(statm), 0.2, w
      end
      metrics = control("/metrics").body
      assert_equal 2, metrics.scan(/^oribi_worker_rss_bytes\{worker="\d"\} [1-9]\d*$/).size, metrics
    end
  end

  def test_busy_worker_and_its_request
    start(workers: 1)
    slow = @srv.tcp
    slow.write("GET /slow?sleep=2&api_key=hunter2 HTTP/1.1\r\nHost: t\r\n\r\n")
    busy = wait_until { stats["workers"].find { |w| w["busy"] } }
    assert busy, "no worker shown busy"
    assert_equal "GET /slow", busy["request"] # query strings may carry secrets
    assert_equal 1, busy["connections"]["active"]
    assert_equal 200, HTTPClient.read_response(slow).status
    assert wait_until { stats["workers"].none? { |w| w["busy"] } }
  ensure
    slow&.close
  end

  def test_active_and_idle_connections
    start(workers: 1)
    idle = 3.times.map { @srv.tcp }
    idle.each { |s| assert_equal 200, get(sock: s, headers: {}).status } # kept alive, now idle
    partial = @srv.tcp
    partial.write("GET / HTTP/1.1\r\nHo") # a request on its way: active
    conns = wait_until { (c = stats["workers"][0]["connections"]) == { "active" => 1, "idle" => 3 } && c }
    assert conns, "connections: #{stats['workers'][0]['connections']}"
    idle.each(&:close)
    assert wait_until { stats["workers"][0]["connections"]["idle"].zero? }
  ensure
    [*idle, partial].compact.each(&:close)
  end

  def test_queue_time_from_x_request_start
    start(workers: 1)
    cumulative = -> { stats["queue_time"]["buckets"] }
    before = cumulative.call
    # nginx's t=${msec}: 6 s ago lands in the 10 bucket, not 5 (the margins
    # leave seconds for a loaded machine to hand the request over)
    get(headers: { "Connection" => "close", "X-Request-Start" => format("t=%.3f", Time.now.to_f - 6) })
    after = cumulative.call
    assert_equal before["5"], after["5"]
    assert_equal before["10"] + 1, after["10"]
    # Heroku's milliseconds: 3 s ago lands in 5, not 2.5
    get(headers: { "Connection" => "close", "X-Request-Start" => ((Time.now.to_f - 3) * 1000).round.to_s })
    last = cumulative.call
    assert_equal after["2.5"], last["2.5"]
    assert_equal after["5"] + 1, last["5"]
    assert_equal 2, stats["queue_time"]["from_header"]
    assert_operator stats["queue_time"]["sum"], :>=, 8.99 # both stamps rounded to the ms
  end

  # Only a trusted proxy's stamp counts: from any other peer (here loopback
  # and unix, with only 10.0.0.0/8 trusted) one request moved the sum by
  # 86,000 s.
  def test_x_request_start_only_from_trusted_proxies
    start("--trusted-proxies", "10.0.0.0/8,fd00::/8", workers: 1)
    stamp = format("t=%.3f", Time.now.to_f - 86_000)
    get(headers: { "Connection" => "close", "X-Request-Start" => stamp })
    get(sock: @srv.unix, headers: { "Connection" => "close", "X-Request-Start" => stamp })
    q = stats["queue_time"]
    assert_operator q["count"], :>=, 2, q.inspect
    assert_equal 0, q["from_header"], q.inspect
    assert_operator q["sum"], :<, 60, q.inspect
  end

  # A client's own stamp passed on by a trusted proxy (nginx does, unless
  # told to overwrite it) moved the sum by a day: a stamp from long before
  # the server started, or from the future, is refused and counted.
  def test_x_request_start_that_cannot_be_is_refused_and_counted
    start(workers: 1)
    now = Time.now.to_f
    [now - 86_000, now - 3_600, now + 30].each do |t|
      get(headers: { "Connection" => "close", "X-Request-Start" => format("t=%.3f", t) })
    end
    get(headers: { "Connection" => "close", "X-Request-Start" => format("t=%.3f", now - 2) })
    q = nil
    assert wait_until { (q = stats["queue_time"])["count"] == 4 }, q.inspect
    assert_equal [1, 3], q.values_at("from_header", "header_refused")
    assert_operator q["sum"], :<, 60, q.inspect
    assert_operator q["sum"], :>=, 1.99, q.inspect
    assert_match(/^oribi_request_queue_header_refused_total 3$/, control("/metrics").body)
  end

  def test_x_request_start_forms
    parse = Oribi::Scoreboard.method(:parse_request_start)
    assert_equal 1_700_000_000_123_000, parse.call("t=1700000000.123") # nginx ${msec}
    assert_equal 1_700_000_000_123_456, parse.call("t=1700000000123456") # microseconds
    assert_equal 1_700_000_000_123_000, parse.call("1700000000123") # Heroku milliseconds
    assert_equal 1_700_000_000_000_000, parse.call("t=1700000000")
    ["", "t=", "x", "t=12", "t=1700000000.1x", "-1700000000", "t=99999999999999999999999"].each do |bad|
      assert_nil parse.call(bad), bad
    end
  end

  def test_queue_time_counts_the_wait_behind_a_busy_worker
    start(workers: 1)
    slow = @srv.tcp
    slow.write("GET /?sleep=0.6 HTTP/1.1\r\nHost: t\r\n\r\n")
    assert wait_until { @srv.log.include?("sleeping") }
    waiting = @srv.tcp
    waiting.write("GET / HTTP/1.1\r\nHost: t\r\n\r\n") # accepted once the worker is free
    assert_equal 200, HTTPClient.read_response(slow).status
    assert_equal 200, HTTPClient.read_response(waiting).status
    # measured from accept: the time in the kernel's backlog is not seen
    assert_equal 2, stats["queue_time"]["count"]
  ensure
    slow&.close
    waiting&.close
  end

  def test_backlog_of_tcp_and_unix_listeners
    start(workers: 1)
    unless TCPServer.open("127.0.0.1", 0) { |probe| Oribi.listen_queue(probe.fileno) }
      # A build that cannot read the queue (macOS, the portable build) says
      # nothing rather than 0.
      assert_equal [[nil, nil]] * 2, stats["listeners"].map { |l| [l["backlog"], l["backlog_max"]] }
      return
    end
    slow = @srv.tcp
    slow.write("GET /?sleep=3 HTTP/1.1\r\nHost: t\r\n\r\n")
    assert wait_until { @srv.log.include?("sleeping") }
    queued = 3.times.map { @srv.tcp } + 2.times.map { @srv.unix }
    queued.each { |s| s.write("GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n") }
    listeners = wait_until do
      l = stats["listeners"]
      l if l.find { |x| x["uri"].start_with?("tcp") }["backlog"] >= 3 && l.find { |x| x["uri"].start_with?("unix") }["backlog"] >= 2
    end
    assert listeners, "backlog: #{stats['listeners']}"
    assert_equal [1024, 1024], listeners.map { |l| l["backlog_max"] }
    metrics = control("/metrics").body
    assert_match(/^oribi_listener_backlog\{listener="tcp:[^"]+"\} 3$/, metrics)
    queued.each { |s| assert_equal 200, HTTPClient.read_response(s).status }
  ensure
    [slow, *queued].compact.each(&:close)
  end

  NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*"
  LABELS = '\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\\]|\\\\.)*",?)*\}'
  PROM_LINE = /\A(# (HELP|TYPE) #{NAME} .+|#{NAME}(#{LABELS})? ([-+]?[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?|[-+]Inf|NaN))\z/

  def test_metrics_are_prometheus_text
    start
    5.times { get }
    # served is counted once the response is out: the client may be first
    res = nil
    assert wait_until { (res = control("/metrics")).body.include?("\noribi_requests_total 5\n") }, res&.body
    assert_equal 200, res.status
    assert_match(%r{\Atext/plain; version=0\.0\.4}, res["content-type"])
    lines = res.body.lines.map(&:chomp)
    bad = lines.reject { |l| l.match?(PROM_LINE) }
    assert_empty bad
    assert_includes lines, "oribi_requests_total 5"
    assert_includes lines, 'oribi_request_queue_seconds_bucket{le="+Inf"} 5'
    assert_includes lines, "oribi_request_queue_seconds_count 5"
    types = lines.grep(/\A# TYPE/).map { |l| l.split[2] }
    assert_equal types.uniq, types, "a metric declared twice"
    served = lines.grep(/\Aoribi_worker_requests_total\{/).sum { |l| l.split.last.to_i }
    assert_equal 5, served
  end

  def test_tcp_control_needs_the_token
    start(control: :tcp)
    assert_equal 401, control("/stats").status
    assert_equal 403, control("/stats", headers: { "Authorization" => "Bearer wrong" }).status
    assert_equal 403, control("/stats?token=wrong").status
    assert_equal 200, control("/stats", headers: { "Authorization" => "Bearer #{TOKEN}" }).status
    # ready once every worker serves (503 "booting" until then, a slow
    # machine's boot): the token in the query is taken as well
    assert wait_until(timeout: 30) { control("/readyz?token=#{TOKEN}").status == 200 }
    status, out = ctl("ready", "--token", TOKEN)
    assert_equal [0, "ready\n"], [status, out]
    status, = ctl("ready", "--token", "nope")
    assert_equal 1, status
  end

  # Idle and half-sent connections must not hold the slots a liveness probe
  # needs: the probes are answered at once, the oldest partial clients lose
  # their slots first.
  def test_idle_clients_do_not_starve_authenticated_probes
    start(control: :tcp, workers: 1)
    kind, host, port = Oribi::Listeners.parse(@control)
    assert_equal :tcp, kind
    # an attacker does not wait for a connection the backlog has no room for
    open = -> { Socket.tcp(host, port, connect_timeout: 0.5) rescue nil } # rubocop:disable Style/RescueModifier
    idle = 20.times.filter_map { open.call }
    idle += 20.times.filter_map { open.call&.tap { |s| s.write("GET /healthz HTTP/1.1\r\nHost: t\r\n") } }
    # waiting for a slot would take until the idle clients' head timeout
    limit = Oribi::Control::HEAD_TIMEOUT * 0.75
    took = 6.times.map do
      t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      sock = Socket.tcp(host, port, connect_timeout: limit)
      sock.write("GET /healthz HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer #{TOKEN}\r\n\r\n")
      res = HTTPClient.read_response(sock, timeout: limit)
      assert_equal 200, res&.status
      sock.close
      Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    end
    assert_operator took.max, :<, limit, "probe times: #{took.map { |t| t.round(3) }}"
    assert HTTPClient.closed?(idle.first, timeout: 5), "the oldest idle client keeps its slot"
  ensure
    idle&.each(&:close)
  end

  # A length check before a constant-time compare tells an attacker the
  # token's length: what is compared must not depend on what was given.
  def test_token_is_compared_without_revealing_its_length
    start(control: :tcp, workers: 1)
    given = ["", "x", TOKEN[0..-2], "#{TOKEN}x", "y" * 4000].map { |t| t.empty? ? "Bearer" : "Bearer #{t}" }
    given.each { |h| assert_includes [401, 403], control("/healthz", headers: { "Authorization" => h }).status, h[0, 20] }
    assert_equal 200, control("/healthz", headers: { "Authorization" => "Bearer #{TOKEN}" }).status
    compared = []
    real = Rack::Utils.method(:secure_compare)
    endpoint = Oribi::Control.new("unix://#{@dir}/probe.sock", token: TOKEN)
    Rack::Utils.stub(:secure_compare, ->(a, b) { compared << [a.bytesize, b.bytesize] && real.call(a, b) }) do
      [*given, "Bearer #{TOKEN}"].each { |h| endpoint.send(:authorize, h, nil) }
    end
    assert_equal [[32, 32]], compared.uniq, "the compared lengths follow the given token"
  ensure
    endpoint&.close
  end

  def test_tcp_control_without_token_is_refused_at_start
    out = IO.popen([RbConfig.ruby, File.join(ROOT, "exe/oribi"), "--control", "tcp://127.0.0.1:1", File.join(APPS, "stats.ru")],
                   err: %i[child out], &:read)
    refute $?.success?
    assert_match(/control_token/, out)
  end

  def test_bad_and_unknown_control_requests
    start(workers: 1)
    assert_equal 404, control("/nope").status
    assert_equal 405, control("/stop").status # GET
    assert_equal 405, control("/stats", method: "POST").status
    sock = control_socket
    sock.write("BAD\r\n\r\n")
    assert_equal 400, HTTPClient.read_response(sock).status
    sock.close
    sock = control_socket
    sock.write("GET /stats HTTP/1.1\r\n" + "X-Pad: #{'a' * 9000}\r\n\r\n")
    res = HTTPClient.read_response(sock)
    assert_equal 431, res.status
    assert_equal "HTTP/1.1 431 Request Header Fields Too Large\r\n", res.raw.lines.first # Rack's phrase
    sock.close
    # read by the workers' parser: its verdicts, answered before any body
    { "GET /stats HTTP/1.1\r\n\r\n" => 400, # no Host
      "GET /stats HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" => 400,
      "POST /stop HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n" => 413,
      "GET /stats HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n" => 400,
      "GET /#{'a' * 9000} HTTP/1.1\r\n" => 414,
      "GET /stats HTTP/2.0\r\nHost: t\r\n\r\n" => 505 }.each do |req, code|
      sock = control_socket
      sock.write(req)
      assert_equal code, HTTPClient.read_response(sock).status, req[0, 60].inspect
      sock.close
    end
    # a small body is read and ignored; absolute-form targets name the path
    sock = control_socket
    sock.write("GET http://oribi/healthz?x=1 HTTP/1.1\r\nHost: oribi\r\nContent-Length: 3\r\n\r\nabc")
    assert_equal 200, HTTPClient.read_response(sock).status
    sock.close
    # a silent client does not hold the master up
    silent = control_socket
    assert_equal 200, control("/healthz").status
    assert_equal 200, get.status
    assert HTTPClient.closed?(silent, timeout: 10), "a silent control client is dropped"
  ensure
    silent&.close
  end

  # `oribi ctl` reads the answer with the codec: framed by Content-Length
  # or chunked, and refused when it is not HTTP or stops short.
  def test_ctl_frames_the_answer
    @dir = Dir.mktmpdir("oribi-ctl")
    @control = "unix://#{@dir}/fake.sock"
    server = UNIXServer.new("#{@dir}/fake.sock")
    { "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\nextra" => [0, "ok\n"],
      "HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nbusy\n\r\n0\r\n\r\n" => [1, "busy\n"],
      "HTTP/1.1 200 OK\r\n\r\nto the end" => [0, "to the end"],
      "HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\nshort" => [2, /truncated answer/],
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nbu" => [2, /truncated answer/],
      "SSH-2.0-OpenSSH\r\n" => [2, /not an HTTP answer/] }.each do |answer, (code, out)|
      fake = Thread.new do
        c = server.accept
        c.readpartial(4096)
        c.write(answer)
        c.close
      end
      status, text = ctl("health")
      fake.join
      assert_equal code, status, answer.inspect
      out.is_a?(Regexp) ? assert_match(out, text) : assert_equal(out, text)
    end
  ensure
    server&.close
  end

  def test_readyz_turns_503_on_drain_while_requests_finish
    start(workers: 1)
    assert wait_until { control("/readyz").status == 200 }
    slow = @srv.tcp
    slow.write("GET /?sleep=2 HTTP/1.1\r\nHost: t\r\n\r\n")
    assert wait_until { @srv.log.include?("sleeping") }
    Process.kill(:TERM, @srv.pid)
    res = wait_until { (r = control("/readyz")).status == 503 && r }
    assert res, "readyz never turned 503"
    assert_equal "stopping\n", res.body
    assert_equal 200, HTTPClient.read_response(slow).status
    assert @srv.wait_exit(10)&.success?
  ensure
    slow&.close
  end

  def test_readyz_503_until_workers_booted
    Dir.mktmpdir do |d|
      conf = File.join(d, "oribi.rb")
      gate = File.join(d, "boot")
      # the workers finish booting when the test says so (bounded: 30 s)
      File.write(conf, "after_fork { |_s, _i| 3000.times { break if File.exist?(#{gate.dump}); sleep 0.01 } }\n")
      start("-C", conf, workers: 2)
      res = control("/readyz")
      assert_equal [503, "booting\n"], [res.status, res.body]
      File.write(gate, "")
      assert wait_until(timeout: 10) { control("/readyz").status == 200 }
    end
  end

  def test_ctl_restart_replaces_every_worker
    start("--rolling-interval", "0", workers: 2)
    assert wait_until { @srv.worker_pids.size == 2 }
    before = @srv.worker_pids
    status, out = ctl("restart")
    assert_equal 0, status, out
    assert_match(/rolling restart of 2 worker/, out)
    assert wait_until(timeout: 15) { (@srv.worker_pids & before).empty? && @srv.worker_pids.size == 2 },
           "workers not replaced: #{before} -> #{@srv.worker_pids}"
    assert wait_until { @srv.log.include?("rolling restart done") }
    assert_equal 200, get.status
    assert_operator stats["workers"].size, :==, 2
  end

  def test_ctl_stop_makes_the_master_exit_0
    start(workers: 2)
    get
    status, out = ctl("stop")
    assert_equal [0, "stopping\n"], [status, out]
    exit_status = @srv.wait_exit(15)
    assert exit_status&.success?, "exit status #{exit_status.inspect}"
    refute File.exist?(@control.delete_prefix("unix://")), "the control socket file is removed"
    status, = ctl("stats")
    assert_equal 2, status # nothing to talk to
  end

  # USR2 re-execs the master in place: the endpoint is the same socket, kept
  # across exec, and answers for the new image's workers.
  def test_hot_restart_keeps_the_control_endpoint
    start(workers: 1)
    before = stats
    Process.kill(:USR2, @srv.pid)
    assert wait_until(timeout: 20) { @srv.log.include?("USR2 done") }, @srv.log
    after = stats
    assert_equal @srv.pid, after["pid"]
    refute_equal before["workers"].map { |w| w["pid"] }, after["workers"].map { |w| w["pid"] }
    assert_equal 200, control("/readyz").status
  end

  # While a USR2's new workers boot the previous ones serve: /readyz stays
  # 200 (a probe must not take the pod out for a deploy).
  def test_readyz_stays_ready_through_a_hot_restart
    conf = File.join(Dir.mktmpdir("oribi-conf"), "oribi.rb")
    marker = "#{conf}.slow"
    File.write(conf, "after_worker_boot { sleep 2 if File.exist?(#{marker.dump}) }\n")
    start("-C", conf, workers: 1)
    assert wait_until(timeout: 10) { control("/readyz").status == 200 }
    File.write(marker, "")
    Process.kill(:USR2, @srv.pid)
    seen = []
    until @srv.log.include?("USR2 done")
      seen << (control("/readyz")&.then { |r| "#{r.status} #{r.body.strip}" } rescue :refused) # rubocop:disable Style/RescueModifier
      flunk "no USR2 done in 30 s:\n#{@srv.log}" if seen.size > 3000
      sleep 0.01
    end
    assert_operator seen.size, :>, 10, "too few probes while the new workers booted"
    assert_equal ["200 ready"], seen.uniq, "#{seen.tally.inspect}\n#{@srv.log}"
  end

  # The new image of a USR2 loads Ruby, its gems and the app (here 3 s)
  # before its loop runs; the previous workers serve all that time, and a
  # load balancer's health check, which gives up after a short timeout,
  # must hear so: every probe is answered at once, /readyz with 200.
  def test_the_control_endpoint_answers_while_the_new_code_loads
    dir = Dir.mktmpdir("oribi-slow-load")
    marker = File.join(dir, "slow")
    app = File.join(dir, "app.ru")
    File.write(app, "sleep 3 if File.exist?(#{marker.dump})\nrun ->(_env) { [200, {}, [Process.pid.to_s]] }\n")
    @dir = Dir.mktmpdir("oribi-control")
    @control = "tcp://127.0.0.1:#{free_port}"
    @srv = ServerProcess.new(app, "--control", @control, "--control-token", TOKEN, "--preload", workers: 1)
    assert wait_until(timeout: 10) { quick("/readyz")&.first == 200 }
    File.write(marker, "")
    Process.kill(:USR2, @srv.pid)
    assert wait_until { @srv.log.include?("USR2: re-executing") }, @srv.log
    seen = Hash.new { |h, k| h[k] = [] }
    slowest = 0.0
    until @srv.log.include?("USR2 done")
      %w[/readyz /healthz /stats /metrics].each do |path|
        t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        seen[path] << (quick(path) || :no_answer_in_300ms)
        slowest = [slowest, Process.clock_gettime(Process::CLOCK_MONOTONIC) - t].max
      end
      flunk "no USR2 done in 30 s:\n#{@srv.log}" if seen["/readyz"].size > 600
      sleep 0.02 # a probe's interval
    end
    puts "\n/readyz during a USR2 whose app loads for 3 s: #{seen['/readyz'].size} probes, #{seen['/readyz'].tally}; " \
         "slowest answer of all #{(slowest * 1000).round} ms"
    assert_equal [[200, "ready"]], seen["/readyz"].uniq, "#{seen['/readyz'].tally}\n#{@srv.log}"
    assert_operator seen["/readyz"].size, :>, 20, "too few probes during the load"
    assert_equal [[200, "ok"]], seen["/healthz"].uniq
    assert_includes seen["/stats"], [200, true], "the previous workers' stats, said to be from the reload"
    assert_equal [200], seen["/metrics"].map(&:first).uniq
  ensure
    FileUtils.rm_rf(dir) if dir
  end

  # [status, body] of a control request answered within 300 ms, else nil.
  def quick(path)
    sock = control_socket
    sock.write("GET #{path}?token=#{TOKEN} HTTP/1.1\r\nHost: t\r\n\r\n")
    res = HTTPClient.read_response(sock, timeout: 0.3)
    return nil unless res

    [res.status, path == "/stats" ? JSON.parse(res.body)["reloading"] : res.body.lines.first.strip]
  rescue Timeout::Error, SystemCallError
    nil
  ensure
    sock&.close
  end

  def test_totals_keep_what_replaced_workers_served
    start("--rolling-interval", "0", workers: 1)
    4.times { get }
    before = @srv.worker_pids
    ctl("restart")
    assert wait_until(timeout: 15) { (@srv.worker_pids & before).empty? && stats["workers"].size == 1 }
    get
    # served is counted once the response is out: the client may be first
    s = nil
    assert wait_until { (s = stats)["requests_total"] == 5 }, "requests_total #{s && s['requests_total']}"
    assert_equal 1, s["workers"][0]["served"]
    assert_equal 5, s["queue_time"]["count"]
  end

  def test_oob_gc_runs_between_requests
    start("--oob-gc", "1", workers: 1)
    counts = 10.times.map { get.body.split.last.to_i } # GC.count as the app saw it
    # at the first idle moment after each request, or at the latest after 2
    assert_operator counts.last - counts.first, :>=, 4, "GC counts: #{counts}"
    start("--oob-gc", "0", workers: 1)
    counts = 10.times.map { get.body.split.last.to_i }
    assert_operator counts.last - counts.first, :<, 3, "GC counts without oob_gc: #{counts}"
  end
end
