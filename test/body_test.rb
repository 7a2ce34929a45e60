# frozen_string_literal: true

require "test_helper"
require "digest/md5"

# Request bodies: memory up to --body-buffer, a tmpfile beyond; limits;
# Expect: 100-continue; bodies that never finish.
class BodyTest < Minitest::Test
  include SharedServer
  server "echo.ru", "--body-buffer", "1024", "--max-body", "200000"

  def fields(res) = res.body.lines.to_h { |l| l.chomp.split(": ", 2) }

  def test_small_body_stays_in_memory
    res = HTTPClient.request(server.tcp, "/", method: "POST", body: "x" * 1000)
    assert_equal "StringIO", fields(res)["input-class"]
    assert_equal "1000", fields(res)["body-bytes"]
    assert_equal "true", fields(res)["rewind-ok"]
  end

  def test_large_body_spills_to_a_tmpfile_and_arrives_intact
    body = Random.new(1).bytes(150_000)
    server.each_transport do |name, open|
      res = HTTPClient.request(open.call, "/", method: "POST", body: body)
      f = fields(res)
      assert_equal "File", f["input-class"], name
      assert_equal body.bytesize.to_s, f["body-bytes"]
      assert_equal Digest::MD5.hexdigest(body), f["body-md5"]
      assert_equal "true", f["rewind-ok"] # rack.input can be read again
    end
  end

  def test_large_chunked_body_spills_and_arrives_intact
    body = Random.new(2).bytes(100_000)
    s = server.tcp
    s.write("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
    body.bytes.each_slice(7_777) { |sl| s.write(format("%x\r\n", sl.size) + sl.pack("C*") + "\r\n") }
    s.write("0\r\n\r\n")
    f = fields(HTTPClient.read_response(s))
    assert_equal "File", f["input-class"]
    assert_equal "100000", f["CONTENT_LENGTH"]
    assert_equal Digest::MD5.hexdigest(body), f["body-md5"]
  end

  def test_content_length_over_the_limit_is_413_without_reading_the_body
    s = server.tcp
    s.write("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 200001\r\n\r\n")
    res = HTTPClient.read_response(s)
    assert_equal 413, res.status
    assert_equal "close", res["connection"]
  end

  def test_chunked_body_over_the_limit_is_413
    s = server.tcp
    s.write("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
    4.times { s.write("10000\r\n" + ("z" * 0x10000) + "\r\n") } # 256 KiB > 200000
    res = HTTPClient.read_response(s)
    assert_equal 413, res.status
    assert HTTPClient.closed?(s)
  rescue Errno::EPIPE, Errno::ECONNRESET
    flunk "the 413 must be readable before the connection goes"
  end

  def test_expect_100_continue
    s = server.tcp
    s.write("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5
    assert_equal "HTTP/1.1 100 Continue\r\n", HTTPClient.read_line(s, deadline)
    assert_equal "\r\n", HTTPClient.read_line(s, deadline)
    s.write("hello")
    assert_equal "hello", fields(HTTPClient.read_response(s))["body"]
  end

  def test_expect_100_continue_over_the_limit_gets_413_not_100
    s = server.tcp
    s.write("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 900000\r\nExpect: 100-continue\r\n\r\n")
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5
    assert_match(/\AHTTP\/1.1 413/, HTTPClient.read_line(s, deadline))
  end

  def test_unknown_expectation_is_417
    s = server.tcp
    s.write("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nExpect: teapot\r\n\r\nx")
    res = HTTPClient.read_response(s)
    assert_equal 417, res.status
    assert_equal "close", res["connection"] # the body may or may not follow: framing is unsure
  end

  def test_eof_mid_body_never_reaches_the_app
    s = server.tcp
    s.write("POST /partial HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nonly-part")
    s.close_write
    assert HTTPClient.closed?(s)
    assert_equal 200, HTTPClient.request(server.tcp, "/after").status
    assert_match(%r{served GET /after}, server.log_until(%r{served GET /after}))
    refute_match(%r{served POST /partial}, server.log)
  end

  def test_body_is_not_confused_with_the_next_request
    s = server.unix
    smuggled = "GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n"
    s.write("POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: #{smuggled.bytesize}\r\n\r\n#{smuggled}")
    f = fields(HTTPClient.read_response(s))
    assert_equal "/a", f["PATH_INFO"]
    assert_equal Digest::MD5.hexdigest(smuggled), f["body-md5"]
    s.write("GET /next HTTP/1.1\r\nHost: t\r\n\r\n")
    assert_equal "/next", fields(HTTPClient.read_response(s))["PATH_INFO"]
  end

  # Without --max-body a body may be 100 MiB; --max-body 0 lifts the limit.
  def test_default_limit_is_100_mib_and_0_lifts_it
    limit = 100 * 1024 * 1024
    head = "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: #{limit + 1}\r\nExpect: 100-continue\r\n\r\n"
    srv = ServerProcess.new("echo.ru", workers: 1)
    s = srv.tcp
    s.write(head)
    assert_equal 413, HTTPClient.read_response(s).status
    s.close
    s = srv.tcp # a chunked body is cut once it passes the limit
    s.write("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
    mib = "x" * (1024 * 1024)
    101.times { s.write("100000\r\n#{mib}\r\n") }
    assert_equal 413, HTTPClient.read_response(s, timeout: 20).status
    s.close
    srv.stop
    srv = ServerProcess.new("echo.ru", "--max-body", "0", workers: 1)
    s = srv.tcp
    s.write(head)
    assert_equal "HTTP/1.1 100 Continue\r\n", HTTPClient.read_line(s, Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5)
  ensure
    s&.close
    srv&.stop
  end

  def test_a_body_that_cannot_be_spilled_is_a_logged_500
    Dir.mktmpdir do |d|
      gone = File.join(d, "gone") # no such directory: like a full or unwritable disk
      srv = ServerProcess.new("echo.ru", "--body-buffer", "1024", env: { "TMPDIR" => gone })
      res = HTTPClient.request(srv.tcp, "/", method: "POST", body: "x" * 5000)
      assert_equal 500, res.status
      assert_match(/answered 500: a request body \(\d+ bytes so far\) could not be spilled: no tmpfile in #{Regexp.escape(gone)}: No such file or directory/,
                   srv.log_until(/answered 500/))
    ensure
      srv&.stop
    end
  end
end
