# frozen_string_literal: true

require "test_helper"
require "digest"

# Clients that read their responses slowly, or not at all, must neither
# hold an app thread (the rest of a response is the loop's to send) nor
# make a worker keep unbounded output (max_write_backlog).
class SlowReadersTest < Minitest::Test
  FILE_MB = 16

  def start(*args)
    @srv = ServerProcess.new("readers.ru", "-t", "1", *args, workers: 0, env: { "FILE_MB" => FILE_MB.to_s })
  end

  def teardown
    @srv&.stop
  end

  def request(path, sock = @srv.tcp)
    sock.write("GET #{path} HTTP/1.1\r\nHost: t\r\n\r\n")
    sock
  end

  def test_a_client_that_reads_nothing_does_not_hold_the_only_app_thread
    start("--write-timeout", "20")
    stalled = request("/file")
    assert wait_until { stalled.wait_readable(0) }, "the file response began"
    t = now
    res = HTTPClient.read_response(request("/"), timeout: 15)
    assert_equal 200, res&.status
    assert_operator now - t, :<, 3, "answered beside a client that reads nothing (write_timeout is 20 s)"
    res = HTTPClient.read_response(stalled, timeout: 20)
    assert_equal FILE_MB << 20, res.body.bytesize
    assert_equal Digest::MD5.hexdigest(Random.new(7).bytes(FILE_MB << 20)), Digest::MD5.hexdigest(res.body)
  ensure
    stalled&.close
  end

  def test_a_streamed_body_to_a_client_that_reads_nothing_does_not_hold_the_app_thread
    start("--write-timeout", "20")
    stalled = request("/each", @srv.unix)
    assert wait_until { stalled.wait_readable(0) }, "the streamed response began"
    t = now
    res = HTTPClient.read_response(request("/"), timeout: 15)
    assert_equal 200, res&.status
    assert_operator now - t, :<, 3, "answered beside a client that reads nothing (write_timeout is 20 s)"
    assert_equal 4 << 20, HTTPClient.read_response(stalled, timeout: 20).body.bytesize
  ensure
    stalled&.close
  end

  def test_a_slow_reader_is_not_cut_off_while_it_reads
    start("--write-timeout", "2")
    s = request("/file")
    got = 0
    deadline = now + 30
    # About 64 KiB per 40 ms: the whole file takes longer than write_timeout,
    # but no 2 s pass without the client taking bytes.
    while got < (FILE_MB << 20) + 100 && now < deadline
      chunk = HTTPClient.read_some(s, 65_536, now + 5) or break
      got += chunk.bytesize
      sleep 0.04 # the client's pace, not a synchronisation
    end
    assert_operator got, :>, FILE_MB << 20, "the slow reader got the whole file"
  ensure
    s&.close
  end

  def test_the_write_backlog_of_clients_that_read_nothing_is_capped
    start("--max-write-backlog", (8 << 20).to_s, "--write-timeout", "30")
    warm = HTTPClient.read_response(request("/array"), timeout: 10)
    assert_equal 1 << 20, warm.body.bytesize
    before = @srv.rss_kib
    fds = @srv.fd_count
    # over unix: its socket buffers are small, so what a client does not
    # read stays in the worker
    stalled = Array.new(60) { request("/array", @srv.unix) }
    assert wait_until(timeout: 15) { @srv.log.include?("over max_write_backlog") }, @srv.log
    res = HTTPClient.read_response(request("/"), timeout: 10)
    assert_equal 200, res&.status
    grown = (@srv.rss_kib - before) / 1024
    # ASan's quarantine keeps freed memory mapped: RSS says nothing there
    assert_operator grown, :<, 40, "RSS grew #{grown} MiB for 60 x 1 MiB not read, with an 8 MiB cap" unless ENV["ORIBI_SANITIZE"]
    assert wait_until(timeout: 15) { @srv.fd_count <= fds + 20 }, "clients that read nothing are dropped:\n#{@srv.log}"
  ensure
    stalled&.each(&:close)
  end

  private

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
end
