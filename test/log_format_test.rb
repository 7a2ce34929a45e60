# frozen_string_literal: true

require "test_helper"
require "json"

# Error and lifecycle lines in a format a platform can read (log_format):
# JSON or LTSV, one line per event (a backtrace inside it), with level,
# time, pid and worker, written as they happen; by default in the access
# log's format when that is json or ltsv.
class LogFormatTest < Minitest::Test
  FIELDS = %w[time level pid worker msg].freeze

  def teardown
    @srv&.stop
  end

  def start(*args, workers: 1) = (@srv = ServerProcess.new("responses.ru", *args, workers: workers, unix: false))

  # An app exception (with its backtrace), a 5xx the C loop answers itself
  # and a worker's death, each seen in the log while the server runs.
  def events
    assert_equal 500, HTTPClient.request(@srv.tcp, "/raise").status
    s = @srv.tcp
    s.write("GET / HTTP/2.0\r\nHost: t\r\n\r\n")
    assert_equal 505, HTTPClient.read_response(s).status
    worker = @srv.worker_pids.first
    Process.kill(:KILL, worker)
    log = @srv.log_until(/killed by SIGKILL/)
    assert_match(/app failure/, log, "the app's error is not in the log while the server runs")
    assert_match(/answered 505/, log)
    assert_match(/killed by SIGKILL/, log)
    [log, worker]
  end

  def test_json_lines_one_per_event_with_level_time_pid_worker
    start("--log-format", "json")
    _, worker = events
    @srv.stop
    lines = @srv.log.lines
    records = lines.map do |l|
      JSON.parse(l)
    rescue JSON::ParserError
      flunk "not one JSON object per line: #{l.inspect}\n#{@srv.log}"
    end
    records.each { |r| assert_equal FIELDS, FIELDS & r.keys, r.inspect }
    records.each { |r| assert_match(/\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\z/, r["time"]) }
    banner = records.find { |r| r["msg"].start_with?("Oribi ") }
    assert_equal ["info", @srv.pid, nil], banner.values_at("level", "pid", "worker")
    raised = records.find { |r| r["msg"].include?("app raised") }
    assert_equal ["error", worker, 0, "RuntimeError: app failure"], raised.values_at("level", "pid", "worker", "error")
    assert_kind_of Array, raised["backtrace"]
    assert raised["backtrace"].any? { |l| l.include?("responses.ru") }, raised["backtrace"].inspect
    from_c = records.find { |r| r["msg"].include?("answered 505") }
    assert_equal ["error", worker, 0], from_c.values_at("level", "pid", "worker")
    death = records.find { |r| r["msg"].include?("killed by SIGKILL") }
    assert_equal ["error", @srv.pid, nil], death.values_at("level", "pid", "worker")
    assert records.any? { |r| r["msg"].include?("draining") && r["level"] == "info" }
  end

  def test_ltsv_lines
    start("--log-format", "ltsv")
    events
    @srv.stop
    records = @srv.log.lines.map { |l| l.chomp.split("\t").to_h { |f| f.split(":", 2) } }
    records.each { |r| assert_equal FIELDS, FIELDS & r.keys, r.inspect }
    raised = records.find { |r| r["msg"].include?("app raised") }
    assert_equal %w[error 0], raised.values_at("level", "worker")
    assert_match(/responses\.ru/, raised["backtrace"])
    assert_equal "-", records.find { |r| r["msg"].start_with?("Oribi ") }["worker"]
  end

  # The access log's json selects json for the rest too: one format in one stream.
  def test_the_access_log_format_is_the_default
    start("--access-log", "--access-log-format", "json")
    assert_equal 500, HTTPClient.request(@srv.tcp, "/raise").status
    @srv.log_until(/"status":500/)
    @srv.stop
    records = @srv.log.lines.map { |l| JSON.parse(l) }
    assert records.any? { |r| r["level"] == "error" && r["msg"].include?("app raised") }
    assert records.any? { |r| r["status"] == 500 }
  end

  def test_text_stays_as_it_was
    start
    log, = events
    assert_match(/^oribi\[\d+\]: GET \/raise: app raised: RuntimeError: app failure\n    .*responses\.ru/, log)
  end
end
