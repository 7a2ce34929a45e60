# frozen_string_literal: true

require "test_helper"
require "json"

# Request bytes are bytes: whatever a client puts in the target or a header
# value (bytes 0x80-0xff, invalid UTF-8, backslashes, quotes, long values),
# every line the server writes about it stays valid in its format (a JSON
# line decodes, an LTSV line splits, a text line is one line, all of it
# UTF-8), /stats and /metrics answer, the client gets its answer, and no
# process or thread dies for it. docs/CONFIGURATION.md (logs) says how
# such bytes are written.
class LogBytesTest < Minitest::Test
  TOKEN = "t0ken"

  def teardown
    @srv&.stop
  end

  def start(*args, workers: 1, threads: 1)
    @control_port = free_port
    @srv = ServerProcess.new("bytes.ru", "-t", threads.to_s, "--control", "tcp://127.0.0.1:#{@control_port}",
                             "--control-token", TOKEN, *args, workers: workers, unix: false)
    assert wait_until { control("/readyz").status == 200 rescue false } # rubocop:disable Style/RescueModifier
  end

  def control(path)
    sock = TCPSocket.new("127.0.0.1", @control_port)
    HTTPClient.request(sock, path, headers: { "Authorization" => "Bearer #{TOKEN}", "Connection" => "close" })
  ensure
    sock&.close
  end

  # A request written as bytes: target and header values as given.
  def send_raw(target, headers = {}, sock: @srv.tcp)
    head = "GET ".b + target.b + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n".b
    headers.each { |k, v| head << k.b << ": ".b << v.b << "\r\n".b }
    sock.write(head << "\r\n".b)
    sock
  end

  def get(target, headers = {}, timeout: 10)
    sock = send_raw(target, headers)
    HTTPClient.read_response(sock, timeout: timeout)
  ensure
    sock&.close
  end

  def json_lines(log)
    log.lines.map do |l|
      assert l.dup.force_encoding(Encoding::UTF_8).valid_encoding?, "not UTF-8: #{l.inspect}"
      JSON.parse(l)
    rescue JSON::ParserError
      flunk "not one JSON object: #{l.inspect}\n#{log}"
    end
  end

  # Item 1 of hardening round four: the master rendered /stats with the
  # request's bytes, JSON raised, and the master died.
  def test_stats_while_a_request_with_invalid_utf8_runs
    start(threads: 2)
    slow = send_raw("/sleep\xFF?sleep=1.5")
    assert wait_until { control("/stats").body.include?("sleep") }, "the request never showed in /stats"
    res = control("/stats")
    assert_equal 200, res.status
    assert_equal "GET /sleep\\xff", JSON.parse(res.body)["workers"][0]["request"]
    assert_equal 200, control("/metrics").status
    assert_equal 200, HTTPClient.read_response(slow).status
    refute @srv.exited?, @srv.log
  end

  # Item 2: a path that is not ASCII in the JSON access log killed the
  # worker (the access log raised, then its rescue).
  def test_json_access_log_keeps_the_worker_and_writes_the_line
    start("--access-log", "--access-log-format", "json")
    worker = @srv.worker_pids
    ["/caf\xC3\xA9", "/\xFF", "/a\\x41\"b"].each { |path| assert_equal 200, get(path).status, path.inspect }
    log = @srv.log_until(/a\\\\x5cx41/)
    assert_equal worker, @srv.worker_pids, log
    uris = json_lines(log).filter_map { |r| r["uri"] }
    assert_equal ["/café", "/\\xff", "/a\\x5cx41\"b"], uris
  end

  # Item 3: an app error on such a path left the client without an answer
  # and the app thread dead; with Rack's own error message holding \xFF
  # (plain ASCII on the wire) too.
  def test_json_log_app_errors_on_such_bytes_answer_500
    start("--log-format", "json", threads: 2)
    worker = @srv.worker_pids
    2.times { assert_equal 500, get("/raise\xFF", timeout: 5).status }
    assert_equal 500, get("/params?%ff=1&%ff[b]=1", timeout: 5).status
    assert_equal 200, get("/", timeout: 5).status
    log = @srv.log_until(/Rack::QueryParser::ParameterTypeError/)
    assert_equal worker, @srv.worker_pids, log
    records = json_lines(log)
    raised = records.select { |r| r["msg"].include?("app raised") }
    assert_equal 3, raised.size, log
    assert_equal "RuntimeError: app failure on /raise\\xff", raised[0]["error"]
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    @srv.stop
    assert_equal 0, @srv.status.exitstatus, @srv.log
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :<, 10
  end

  # Item 4: the watchdog logged such a path in JSON, raised, and was gone
  # for the worker's life: later slow requests ran on uninterrupted.
  def test_soft_timeout_watchdog_lives_through_such_a_path
    start("--log-format", "json", "--soft-timeout", "0.3", "--soft-timeout-raise")
    assert_equal 500, get("/\xFF?sleep=3").status
    assert_equal 500, get("/again?sleep=3").status, "the second slow request was not interrupted"
    records = json_lines(@srv.log)
    assert_equal ["GET /\\xff?sleep=3", "GET /again?sleep=3"],
                 records.filter_map { |r| r["msg"][/\Asoft_timeout: (\S+ \S+) running/, 1] }
  end

  # Item 5: a byte in the User-Agent kept the request out of the JSON
  # access log.
  def test_user_agent_bytes_still_get_their_access_line
    start("--access-log", "--access-log-format", "json")
    assert_equal 200, get("/ua", { "User-Agent" => "x\xFFy", "Referer" => "caf\xC3\xA9" }).status
    log = @srv.log_until(/"uri":"\/ua"/)
    line = json_lines(log).find { |r| r["uri"] == "/ua" }
    assert_equal ["x\\xffy", "café"], line.values_at("ua", "referer")
    refute_match(/response failed/, log)
  end

  # Item 6: the C side's dropped-header line was text in a JSON log.
  def test_dropped_header_line_is_json
    start("--log-format", "json")
    res = get("/header\xFF")
    assert_equal 200, res.status
    assert_nil res["x-bad"]
    log = @srv.log_until(/dropped response header/)
    line = json_lines(log).find { |r| r["msg"].include?("dropped response header") }
    assert_equal "error", line["level"]
    assert_equal 0, line["worker"]
  end

  # Past the list: every field a client writes, with every kind of byte,
  # through every path that logs, counts or reports it, in each format.
  # Valid UTF-8 that ends a line for some readers (NEL, U+2028, U+2029),
  # starts a terminal's control sequence (CSI) or turns text around (RLO)
  # is among them: a line forged after it would pass for the server's.
  FORGED = "\noribi[1]: worker[0] pid 1 exited"
  VALUES = ["\xFF", "caf\xC3\xA9", "\xC3", "\xED\xA0\x80", "\xF4\x90\x80\x80", "a\\x41b", "q\"u'o", "%ff%00%0a%c3",
            (0x80..0xff).map(&:chr).join, "\x01\x1f\x7f\t", "z" * 6000, "a\xC2\x85#{FORGED}", "a\xE2\x80\xA8#{FORGED}",
            "a\xE2\x80\xA9#{FORGED}", "\xC2\x9B31m", "\xE2\x80\xAEgnp.exe", "\xF0\x9F\x90\xA2"].map(&:b).freeze
  FORMATS = { "json" => %w[--log-format json --access-log --access-log-format json],
              "ltsv" => %w[--log-format ltsv --access-log --access-log-format ltsv],
              "text" => %w[--log-format text --access-log --access-log-format combined] }.freeze
  COMBINED = /\A\S+ - - \[[^\]]+\] "[^"]*" \d{3} (\d+|-) "[^"]*" "[^"]*"\z/

  FORMATS.each do |name, args|
    define_method("test_every_field_with_every_kind_of_byte_in_#{name}") do
      start(*args, "--soft-timeout", "0.2", "--soft-timeout-raise", threads: 2)
      workers = @srv.worker_pids
      statuses = VALUES.flat_map { |v| hostile_requests(v) }
      assert_empty statuses.reject { |st| [200, 400, 414, 431, 500].include?(st) }, "a request was not answered"
      slow = send_raw("/slow#{VALUES[0]}?sleep=0.5".b, { "User-Agent" => VALUES[8] })
      assert wait_until { control("/stats").body.include?("slow") }
      stats = control("/stats")
      assert_equal 200, stats.status
      JSON.parse(stats.body)
      metrics = control("/metrics")
      assert_equal 200, metrics.status
      assert metrics.body.dup.force_encoding(Encoding::UTF_8).valid_encoding?
      assert_equal 500, HTTPClient.read_response(slow).status # soft_timeout_raise
      partial = @srv.tcp.tap { |s| s.write("GET /partial\xFF HTTP/1.1\r\nHost: t\r\nUser-Agent: \xFF\r\nX-More: \xFF".b) }
      app_answered = statuses.count { |st| [200, 500].include?(st) } + 1
      assert wait_until { access_lines(@srv.log, name).size >= app_answered }, "access lines missing\n#{@srv.log}"
      assert_equal workers, @srv.worker_pids, "a worker died\n#{@srv.log}"
      @srv.stop
      partial.close
      assert_equal 0, @srv.status.exitstatus, @srv.log
      log = @srv.log
      refute_match(/thread failed|terminated with exception|Error:.*(JSON|Encoding|ASCII-8BIT)/, log)
      assert_valid_lines(log, name)
      assert_equal app_answered, access_lines(log, name).size, access_lines(log, name).last(3).join
    end
  end

  # Each value in the target, the query, a form-looking query, the
  # exception's message, a dropped header, and each header a log or a
  # metric reads; the statuses.
  def hostile_requests(v)
    pct = v.bytes.map { |b| format("%%%02X", b) }.join
    targets = ["/#{v}", "/raise#{v}", "/?q=#{v}", "/params?#{v}=1&#{v}[b]=1", "/params?#{pct}=1&#{pct}[b]=1",
               "/header#{v}", "/raise?#{pct}"].map(&:b)
    headers = [{ "User-Agent" => v }, { "Referer" => v }, { "X-Forwarded-For" => "203.0.113.9, #{v}".b },
               { "X-Request-Start" => "t=#{v}".b }, { "X-Custom" => v }]
    targets.map { |t| get(t).status } + headers.map { |h| get("/h", h).status }
  end

  def access_lines(log, format)
    case format
    when "json" then log.lines.select { |l| l.start_with?('{"host"') }
    when "ltsv" then log.lines.select { |l| l.start_with?("host:") }
    else log.lines.select { |l| l.b.match?(/\A\S+ - - \[/n) }
    end
  end

  # Every line is ASCII, as nginx and Apache write theirs: what a reader
  # splits lines at (Python's splitlines takes NEL, U+2028 and U+2029 too)
  # and what a terminal acts on never reaches it raw.
  def assert_valid_lines(log, format)
    log.lines.each do |l|
      l = l.dup.force_encoding(Encoding::UTF_8)
      assert l.ascii_only?, "not ASCII: #{l.inspect}"
      assert l.end_with?("\n"), l.inspect
      body = l.chomp
      case format
      when "json"
        assert_kind_of Hash, JSON.parse(body), body
      when "ltsv"
        refute_match(/[\x00-\x08\x0a-\x1f\x7f]/, body)
        body.split("\t").each { |f| assert_match(/\A[a-z_]+:/, f, body) }
      else
        refute_match(/[\x00-\x08\x0a-\x1f\x7f]/, body)
        assert(body.start_with?("    ") || body.match?(/\Aoribi\[\d+\]: /) || body.match?(COMBINED), body)
      end
    end
  end
end
