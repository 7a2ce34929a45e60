# frozen_string_literal: true

require "test_helper"

# Nothing a request's env hands out reaches another request: the input of
# a request without a body, and the callables (rack.early_hints,
# rack.hijack), belong to their own request. An app that keeps them (a
# background thread, a cache) and uses them after that request's response
# acts on no other client: a stale hijack raises IOError, a stale early
# hint does nothing (docs/RACK.md). One app thread, so that the second
# request is served by the same thread (and exchange) as the first.
class RequestScopeTest < Minitest::Test
  def setup
    @srv = ServerProcess.new("request_scope.ru", "-t", "1", "--early-hints", workers: 1)
  end

  def teardown
    @srv&.stop
  end

  def get(path, sock = @srv.tcp, **kw)
    HTTPClient.request(sock, path, **kw)
  end

  # Requests without a body shared one empty input per app thread, and the
  # Rack 3 SPEC lets an app close its input: every later request that read
  # it got 500 (IOError: not opened for reading).
  def test_closing_an_empty_input_leaves_other_requests_theirs
    assert_equal "closed", get("/close-input").body
    assert_equal "closed", get("/close-input", method: "POST", body: "").body
    3.times { assert_equal 'read ""', get("/read-input").body }
    assert_equal 'read ""', get("/read-input", method: "POST", body: "").body
    assert_equal 'read "abc"', get("/read-input", method: "POST", body: "abc").body
    refute_match(/IOError/, @srv.log)
  end

  # Kept callables, used while the thread serves another client: before,
  # that client got the first one's 103 and its socket was hijacked.
  def test_kept_callables_do_nothing_to_another_request
    first = @srv.tcp
    assert_equal "kept", get("/keep", first).body
    second = @srv.tcp
    second.write("GET /use-kept HTTP/1.1\r\nHost: t\r\n\r\n")
    raw = +""
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    raw << HTTPClient.read_line(second, deadline).to_s until raw.match?(/HTTP\/1.1 200 OK\r\n.*?\r\n\r\n/m)
    refute_match(/kept\.css/, raw, "the first request's hint went to the second client")
    assert_match(%r{\AHTTP/1.1 103 Early Hints\r\nlink: </own.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\n}, raw)
    length = raw[/content-length: (\d+)/i, 1].to_i
    body = HTTPClient.read_bytes(second, length, deadline)
    assert_equal "hints: nil returned\nhijack: IOError raised\nown: nil returned\n", body
    # both connections go on as the server's
    assert_equal 200, get("/read-input", second).status
    assert_equal 200, get("/read-input", first).status
  ensure
    first&.close
    second&.close
  end
end
