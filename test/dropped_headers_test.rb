# frozen_string_literal: true

require "test_helper"
require "json"

# A response header the Rack SPEC forbids is dropped, logged once per name
# in a worker and counted in /stats. An app sending `x-rev => nil` (its
# GIT_REVISION unset) on every response logged a line per response: 296
# lines for 300 requests.
class DroppedHeadersTest < Minitest::Test
  def test_a_nil_header_is_logged_once_and_counted
    dir = Dir.mktmpdir("oribi-dropped")
    control = File.join(dir, "control.sock")
    srv = ServerProcess.new("responses.ru", "--control", "unix://#{control}", workers: 1, unix: false)
    s = srv.tcp
    300.times do
      res = HTTPClient.request(s, "/nil-header")
      assert_equal 200, res.status
      refute res.headers.key?("x-rev")
      assert_equal "ok", res.body
    end
    stats = JSON.parse(HTTPClient.request(UNIXSocket.new(control), "/stats").body)
    assert_equal 300, stats["dropped_headers_total"], stats.inspect
    assert_equal [300], stats["workers"].map { |w| w["dropped_headers"] }
    metrics = HTTPClient.request(UNIXSocket.new(control), "/metrics").body
    assert_match(/^oribi_response_headers_dropped_total 300$/, metrics)
    log = srv.log_until(/x-rev/)
    assert_equal 1, log.scan(/dropped response header "x-rev": value is nil, not a String/).size, log_end(log)
  ensure
    s&.close
    srv&.stop
    FileUtils.rm_rf(dir) if dir
  end
end
