# frozen_string_literal: true

require "test_helper"

# What reaches the wire from what the app returns: hygiene, framing,
# hop-by-hop fields, bodyless statuses, failures.
class ResponseTest < Minitest::Test
  include SharedServer
  server "responses.ru"

  def get(path, version: "1.1", sock: server.tcp, head: false)
    sock.write("#{head ? 'HEAD' : 'GET'} #{path} HTTP/#{version}\r\nHost: t\r\n\r\n")
    [HTTPClient.read_response(sock, head: head), sock]
  end

  def test_header_values_with_cr_lf_nul_never_reach_the_wire
    res, s = get("/crlf")
    assert_equal 200, res.status
    refute_match(/Injected/i, res.raw)
    assert_nil res["x-bad"]
    assert_nil res["x-nul"]
    assert_nil res["bad name"]
    assert_equal "ok", res["x-good"]
    assert_equal "1", res["x-list"] # the element with a newline is dropped, the other kept
    assert_match(/dropped response header "x-bad"/, server.log_until(/x-bad/))
    # still in sync afterwards
    assert_equal 200, get("/cookies", sock: s)[0].status
  ensure
    s&.close
  end

  # An Array body goes out a writev per so many parts: every part, in
  # order, however many, with the length the parts make.
  def test_an_array_body_of_many_parts_arrives_whole
    s = server.tcp
    [1, 63, 64, 65, 129, 1000, 5000].each do |n|
      res, = get("/parts?n=#{n}", sock: s)
      want = Array.new(n) { |i| "#{i}," }.join
      assert_equal [200, want.bytesize.to_s], [res.status, res["content-length"]], "#{n} parts"
      assert res.body == want, "#{n} parts: the body differs"
    end
  ensure
    s&.close
  end

  def test_app_hop_by_hop_fields_are_replaced_by_the_servers_own
    res, s = get("/hop")
    assert_equal "hop", res.body
    assert_equal "3", res["content-length"]
    assert_nil res["transfer-encoding"]
    assert_nil res["keep-alive"]
    assert_equal "close", res["connection"] # the app asked to close: honoured
    assert HTTPClient.closed?(s)
  ensure
    s&.close
  end

  def test_bodyless_statuses_and_head
    [[204, false], [304, false], [200, true], [100 + 3, false]].each do |code, head|
      next if code == 103 # 1xx finals are not valid final responses

      s = server.tcp
      s.write("#{head ? 'HEAD' : 'GET'} /status?code=#{code} HTTP/1.1\r\nHost: t\r\n\r\n" \
              "GET /cookies HTTP/1.1\r\nHost: t\r\n\r\n")
      res = HTTPClient.read_response(s, head: true)
      assert_equal code, res.status
      assert_nil res["transfer-encoding"]
      assert_nil res["content-length"] if code == 204
      # the next response must start right after the head: no stray body bytes
      nxt = HTTPClient.read_response(s)
      assert_equal 200, nxt.status, "after #{code} head=#{head}"
      assert_equal "c", nxt.body
      s.close
    end
  end

  def test_unknown_length_body_is_chunked_on_http11
    res, s = get("/stream")
    assert_equal "chunked", res["transfer-encoding"]
    assert_equal "alphabetagamma", res.body
    assert_equal 200, get("/cookies", sock: s)[0].status
  ensure
    s&.close
  end

  def test_unknown_length_body_is_close_delimited_on_http10
    res, s = get("/stream", version: "1.0")
    assert_nil res["transfer-encoding"]
    assert_equal "close", res["connection"]
    assert_equal "alphabetagamma", res.body
  ensure
    s&.close
  end

  def test_streamed_body_with_app_content_length
    res, s = get("/stream-length")
    assert_equal "9", res["content-length"]
    assert_equal "abcdefghi", res.body
    assert_equal 200, get("/cookies", sock: s)[0].status
  ensure
    s&.close
  end

  def test_body_shorter_than_its_content_length_closes_the_connection
    s = server.tcp
    s.write("GET /stream-short HTTP/1.1\r\nHost: t\r\n\r\n")
    data = +""
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5
    while (c = HTTPClient.read_some(s, 4096, deadline))
      data << c
    end
    assert data.end_with?("\r\n\r\nabc"), data
  ensure
    s&.close
  end

  def test_multiple_set_cookie
    res, s = get("/cookies")
    assert_equal ["a=1; path=/", "b=2"], res["set-cookie"]
  ensure
    s&.close
  end

  def test_rack_keys_are_not_sent
    res, s = get("/rack-key")
    assert_nil res["rack.internal"]
    assert_equal "1", res["x-ok"]
  ensure
    s&.close
  end

  def test_app_exception_gives_500_and_the_worker_lives_on
    pid = get("/pid")[0].body
    res, s = get("/raise")
    assert_equal 500, res.status
    assert_match(/app raised: RuntimeError: app failure/, server.log_until(/app failure/))
    assert_match(/responses\.ru:\d+/, server.log) # with its backtrace
    assert_equal pid, get("/pid")[0].body
  ensure
    s&.close
  end

  def test_exception_mid_body_ends_the_connection
    s = server.tcp
    s.write("GET /raise-in-body HTTP/1.1\r\nHost: t\r\n\r\n")
    res = begin
      HTTPClient.read_response(s)
    rescue EOFError
      :truncated
    end
    # headers were already out: the only honest signal left is a close
    # without the final chunk
    assert_equal :truncated, res
    assert HTTPClient.closed?(s)
    assert_match(/response failed: RuntimeError: body failed/, server.log_until(/body failed/))
  ensure
    s&.close
  end

  def test_exception_before_anything_was_written_is_a_500
    res, s = get("/raise-before-write")
    assert_equal 500, res.status
    assert_equal "close", res["connection"]
    refute_includes res.body, "one"
  ensure
    s&.close
  end

  def test_invalid_status_is_a_500
    res, s = get("/bad-status")
    assert_equal 500, res.status
  ensure
    s&.close
  end

  # One Date field (RFC 9110 6.6.1), the app's when it set one.
  def test_one_date_field_and_the_apps_wins
    [["/date", "Tue, 01 Jan 2030 00:00:00 GMT"], ["/date?name=Date", "Tue, 01 Jan 2030 00:00:00 GMT"]].each do |path, want|
      res, s = get(path)
      assert_equal [want], res.raw.scan(/^date: (.*)\r$/i).flatten, res.raw
      s.close
    end
    res, s = get("/cookies")
    assert_equal 1, res.raw.scan(/^date: /i).size, res.raw
  ensure
    s&.close
  end

  # A 205 has no content (RFC 9110 15.3.6): content-length 0, the app's
  # body not sent, and the connection goes on.
  def test_205_is_sent_with_content_length_0
    res, s = get("/status-205")
    assert_equal 205, res.status
    assert_equal "0", res["content-length"], res.raw
    assert_equal "", res.body
    assert_equal 200, get("/cookies", sock: s)[0].status, "in step afterwards"
  ensure
    s&.close
  end

  MISTAKES = %w[huge-status negative-status bignum-status status-600 status-99 float-status headers-array
                body-nil body-int-element not-an-array to-ary-raises].freeze

  # Whatever the app gets wrong between its return and the first byte (a
  # status outside a C int or outside 100..599, headers that are not a
  # Hash, a body that is not one, a response that is no triple) is the
  # server's 500, logged with its cause; the exchange ends and the
  # connection's fd is freed. A status outside a C int used to raise before
  # the response was set up: the client hung, its fd stayed open, and with
  # threads the worker froze until worker_timeout killed it.
  def assert_mistakes_are_logged_500s(srv)
    pid = HTTPClient.request(srv.tcp, "/pid").body.to_i
    before = socket_count(pid)
    MISTAKES.each do |kind|
      s = srv.tcp
      s.write("GET /mistake?kind=#{kind} HTTP/1.1\r\nHost: t\r\n\r\n")
      res = HTTPClient.read_response(s, timeout: 5)
      assert_equal 500, res&.status, "#{kind}: #{res&.raw.inspect}"
      assert_match(/kind=#{kind}: (response failed|app raised): \S/, srv.log_until(/kind=#{kind}: /), kind)
      # the connection goes on or closes cleanly
      s.write("GET /cookies HTTP/1.1\r\nHost: t\r\n\r\n")
      after = HTTPClient.read_response(s, timeout: 5)
      assert_equal 200, after.status, kind if after
      s.close
    end
    assert wait_until(timeout: 5) { socket_count(pid) <= before }, "sockets: #{before} before, #{socket_count(pid)} after"
    assert_equal pid, HTTPClient.request(srv.tcp, "/pid").body.to_i, "the worker was replaced:\n#{srv.log}"
  end

  def test_app_mistakes_are_logged_500s
    assert_mistakes_are_logged_500s(server)
  end

  def test_app_mistakes_are_logged_500s_with_threads
    srv = ServerProcess.new("responses.ru", "--threads", "2", "--request-timeout", "60", workers: 1)
    assert_mistakes_are_logged_500s(srv)
    # two at once: neither freezes the other
    socks = Array.new(2) { srv.tcp.tap { |s| s.write("GET /mistake?kind=huge-status HTTP/1.1\r\nHost: t\r\n\r\n") } }
    socks.each { |s| assert_equal 500, HTTPClient.read_response(s, timeout: 5)&.status }
    assert_equal 200, HTTPClient.request(srv.tcp, "/cookies").status
  ensure
    socks&.each(&:close)
    srv&.stop
  end

  # A 1xx is never a final answer (RFC 9110 15.2): sent as one, the client
  # takes the next response for this request's. A 101 switches only a
  # request that asked to (15.2.2). Each is the server's 500, logged.
  def test_informational_final_status_is_a_logged_500
    [100, 102, 103, 199, 101].each do |code|
      s = server.tcp
      s.write("GET /status?code=#{code} HTTP/1.1\r\nHost: t\r\n\r\nGET /cookies HTTP/1.1\r\nHost: t\r\n\r\n")
      res = HTTPClient.read_response(s)
      assert_equal "HTTP/1.1 500", res.raw[0, 12], "status #{code} as the final answer"
      assert HTTPClient.closed?(s), "status #{code}: nothing after the 500"
      assert_match(/code=#{code}: response failed: ArgumentError: status #{code} /, server.log_until(/status #{code} /))
      s.close
    end
    # Upgrade is HTTP/1.1 only (RFC 9110 7.8): an HTTP/1.0 request asked for nothing
    s = server.tcp
    s.write("GET /status?code=101 HTTP/1.0\r\nUpgrade: x-test\r\nConnection: upgrade\r\n\r\n")
    assert_equal "HTTP/1.1 500", HTTPClient.read_response(s).raw[0, 12], "a 101 to HTTP/1.0"
    assert HTTPClient.closed?(s)
    s.close
    s = server.tcp # asked for: the 101 is the app's to send
    s.write("GET /status?code=101 HTTP/1.1\r\nHost: t\r\nUpgrade: x-test\r\nConnection: upgrade\r\n\r\n")
    assert_equal "HTTP/1.1 101 Switching Protocols\r\n", HTTPClient.read_line(s, Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5)
  ensure
    s&.close
  end

  def test_body_close_is_called_when_the_client_goes_away
    marker = File.join(Dir.tmpdir, "oribi-close-#{Process.pid}-#{rand(1 << 30)}")
    s = server.tcp
    s.write("GET /close-marker?file=#{marker} HTTP/1.1\r\nHost: t\r\n\r\n")
    s.readpartial(1024) # the response started
    s.close # ...and the client is gone mid-body (130 MB left to send)
    assert wait_until(timeout: 10) { File.exist?(marker) }, "body.close was not called"
    assert_equal 200, get("/cookies")[0].status
  ensure
    File.unlink(marker) if marker && File.exist?(marker)
  end

  def test_large_response_to_a_slow_reader_arrives_whole
    s = server.tcp
    s.write("GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
    # another client is served while this one has not read anything yet
    res2, s2 = get("/cookies")
    assert_equal 200, res2.status
    res = HTTPClient.read_response(s, timeout: 20)
    assert_equal 4 * 1024 * 1024, res.body.bytesize
    assert_equal 200, get("/cookies", sock: s)[0].status
  ensure
    s&.close
    s2&.close
  end
end
