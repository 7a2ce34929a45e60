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

  # A normal GET is answered at once beside a client that asked for path
  # and reads nothing (write_timeout is 30 s); that client then gets the
  # whole body, which is returned.
  def body_beside_a_non_reader(path, sock = @srv.tcp)
    stalled = request(path, sock)
    assert wait_until { stalled.wait_readable(0) }, "the response began"
    t = now
    res = HTTPClient.read_response(request("/"), timeout: 20)
    assert_equal 200, res&.status
    assert_operator now - t, :<, 5, "answered beside a client that reads nothing"
    HTTPClient.read_response(stalled, timeout: 30).body
  ensure
    stalled&.close
  end

  def streamed_digest(mib)
    d = Digest::MD5.new
    mib.times { |i| d << Random.new(i).bytes(1 << 20) }
    d.hexdigest
  end

  def test_a_client_that_reads_nothing_does_not_hold_the_only_app_thread
    start("--write-timeout", "30")
    body = body_beside_a_non_reader("/file")
    assert_equal FILE_MB << 20, body.bytesize
    assert_equal Digest::MD5.hexdigest(Random.new(7).bytes(FILE_MB << 20)), Digest::MD5.hexdigest(body)
  end

  # 4 MiB fits in what one conn may keep; 32 MiB is four times that (an
  # eighth of the default 64 MiB max_write_backlog): the rest is spooled to
  # a tmpfile that the loop sends, and the app thread is free at once.
  [4, 32].each do |mib|
    define_method("test_a_streamed_body_of_#{mib}_mib_to_a_client_that_reads_nothing_does_not_hold_the_app_thread") do
      start("--write-timeout", "30")
      body = body_beside_a_non_reader("/each?mb=#{mib}", @srv.unix)
      assert_equal mib << 20, body.bytesize
      assert_equal streamed_digest(mib), Digest::MD5.hexdigest(body)
    end
  end

  # A client that falls behind and then catches up while the app still
  # writes: the thread sends from the spool, then goes back to memory.
  # A streaming body whose client reads nothing: its write gives up after
  # write_timeout, and the connection is dead then. The app's `ensure
  # stream.close` returns at once, and the server drops the connection with
  # what it kept for it, instead of keeping both for another write_timeout.
  def test_a_stream_whose_write_timed_out_is_dead
    start("-t", "2", "--write-timeout", "1")
    sockets = -> { Dir.children("/proc/#{@srv.pid}/fd").count { |fd| File.readlink("/proc/#{@srv.pid}/fd/#{fd}").start_with?("socket:") rescue false } } # rubocop:disable Style/RescueModifier
    first = @srv.tcp # the loop's copies of the listeners are made by then
    assert_equal 200, HTTPClient.request(first, "/", headers: { "Connection" => "close" }).status
    assert HTTPClient.closed?(first)
    before = sockets.call
    t = now
    stalled = Array.new(2) { request("/endless") }
    res = HTTPClient.read_response(beside = request("/"), timeout: 10)
    assert_equal 200, res&.status
    waited = now - t
    beside.close
    assert_match(/endless: close took 0\.0\d s\n.*endless: close took 0\.0\d s/m,
                 @srv.log_until(/(endless: close took.*){2}/m))
    assert wait_until(timeout: 0.5) { sockets.call <= before }, "the dead connections were kept"
    assert_operator waited, :<, 1.8, "the app threads were held #{waited.round(2)} s for a write_timeout of 1 s"
  ensure
    first&.close
    stalled&.each(&:close)
  end

  def test_a_streamed_body_spooled_then_caught_up_arrives_whole
    start("--max-write-backlog", (8 << 20).to_s)
    s = request("/each?mb=16&pace=0.01", @srv.unix)
    assert wait_until(timeout: 20) { @srv.log.include?("each: chunk 4\n") }, @srv.log
    assert_operator tmpfile_bytes, :>, 0, "the response was spooled"
    body = HTTPClient.read_response(s, timeout: 30).body
    assert_equal 16 << 20, body.bytesize
    assert_equal streamed_digest(16), Digest::MD5.hexdigest(body)
    assert_equal 0, tmpfile_bytes, "the spool is closed with the response"
  ensure
    s&.close
  end

  # Bytes of the worker's open tmpfiles (spooled responses, request bodies)
  def tmpfile_bytes
    Dir.children("/proc/#{@srv.pid}/fd").sum do |fd|
      link = File.readlink("/proc/#{@srv.pid}/fd/#{fd}")
      link.include?("(deleted)") || link.match?(%r{/#\d+\z}) ? File.size("/proc/#{@srv.pid}/fd/#{fd}") : 0
    rescue SystemCallError
      0
    end
  end

  # Past max_response_spool the app thread waits for the client again,
  # and the body still arrives whole and in order.
  def test_a_streamed_body_past_the_spool_limit_waits_and_arrives_whole
    start("--max-response-spool", (4 << 20).to_s, "--max-write-backlog", (8 << 20).to_s)
    s = request("/each?mb=24", @srv.unix)
    # a share of 1 MiB kept in memory, then 3 MiB (and their framing)
    # spooled; the chunk that does not fit waits for the client
    assert wait_until(timeout: 20) { @srv.log.include?("each: chunk 5\n") }, @srv.log
    spooled = tmpfile_bytes
    assert_operator spooled, :>, 0, "the response was spooled"
    assert_operator spooled, :<=, 4 << 20, "spooled no more than max_response_spool"
    body = HTTPClient.read_response(s, timeout: 60).body
    assert_equal 24 << 20, body.bytesize
    assert_equal streamed_digest(24), Digest::MD5.hexdigest(body)
  ensure
    s&.close
  end

  # Spooling had a bound per response only: three clients reading nothing
  # of an endless stream filled a 300 MiB TMPDIR in under 2 s, and an
  # unrelated upload then got a 500. The worker's spool is bounded
  # (max_worker_spool): past it, a client that read nothing is dropped and
  # logged; the disk stays within the bound, other requests are answered.
  def test_clients_that_read_nothing_cannot_fill_the_disk
    cap = 24 << 20
    start("-t", "4", "--max-worker-spool", cap.to_s, "--max-write-backlog", (8 << 20).to_s)
    stalled = Array.new(3) { request("/each?mb=4000", @srv.unix) }
    most = 0
    dropped = wait_until(timeout: 60) do
      most = [most, tmpfile_bytes].max
      @srv.log.scan("max_worker_spool (#{cap} bytes) is full: dropped a client").size >= 2
    end
    assert dropped, "no client dropped for the spool\n#{@srv.log}"
    assert_operator most, :<=, cap, "the worker spooled past max_worker_spool"
    upload = "u" * 300_000
    res = HTTPClient.request(@srv.tcp, "/", method: "POST", body: upload, headers: { "Connection" => "close" })
    assert_equal 200, res.status
    assert_equal 200, HTTPClient.request(@srv.tcp, "/", headers: { "Connection" => "close" }).status
    # the dropped clients find their connections closed, with less than they asked for
    taken = stalled.map { |s| drain(s) }
    assert_operator taken.count { |n| n < 4000 << 20 }, :>=, 2, taken.inspect
  ensure
    stalled&.each(&:close)
  end

  # Bytes until EOF (or nothing more for 60 s: a bound, not a pace).
  def drain(sock)
    n = 0
    while (chunk = HTTPClient.read_some(sock, 1 << 20, now + 60))
      n += chunk.bytesize
    end
    n
  rescue Timeout::Error
    n
  end

  def test_a_slow_reader_is_not_cut_off_while_it_reads
    start("--write-timeout", "2")
    s = request("/file")
    head = +""
    body = 0
    closed = false
    deadline = now + 120 # a bound on a stuck test, not the pace
    # At most 64 KiB per 40 ms tick (16 MiB: 256 ticks or more, 10 s or
    # more): the whole file takes longer than write_timeout, but no 2 s
    # pass without the client taking bytes. A tick waits for its first
    # bytes, then takes what the kernel has, up to its share.
    while body < FILE_MB << 20 && now < deadline
      share = 0
      while share < 65_536
        chunk = share.zero? ? HTTPClient.read_some(s, 65_536, now + 10) : s.read_nonblock(65_536 - share, exception: false)
        break if chunk == :wait_readable
        break closed = true unless chunk

        share += chunk.bytesize
        if head.end_with?("\r\n\r\n")
          body += chunk.bytesize
        else
          head << chunk
          head, rest = head.split("\r\n\r\n", 2).then { |h, r| r ? ["#{h}\r\n\r\n", r] : [h, ""] }
          body += rest.bytesize
        end
      end
      break if closed

      sleep 0.04 # the client's pace, not a synchronisation
    end
    assert_match(/\AHTTP\/1.1 200/, head)
    assert_equal FILE_MB << 20, body, "the slow reader got the whole file (closed early: #{closed})"
  ensure
    s&.close
  end

  def test_the_write_backlog_of_clients_that_read_nothing_is_capped
    start("--max-write-backlog", (8 << 20).to_s, "--write-timeout", "30")
    warm = HTTPClient.read_response(request("/array"), timeout: 10)
    assert_equal 1 << 20, warm.body.bytesize
    before = @srv.rss_kib
    sockets = socket_count(@srv.pid) # not fds: libkqueue's build holds two per watched socket
    # over unix: its socket buffers are small, so what a client does not
    # read stays in the worker
    stalled = Array.new(60) { request("/array", @srv.unix) }
    assert wait_until(timeout: 15) { @srv.log.include?("over max_write_backlog") }, @srv.log
    res = HTTPClient.read_response(request("/"), timeout: 10)
    assert_equal 200, res&.status
    grown = (@srv.rss_kib - before) / 1024
    # ASan's quarantine keeps freed memory mapped: RSS says nothing there
    assert_operator grown, :<, 40, "RSS grew #{grown} MiB for 60 x 1 MiB not read, with an 8 MiB cap" unless ENV["ORIBI_SANITIZE"]
    assert wait_until(timeout: 15) { socket_count(@srv.pid) <= sockets + 20 },
           "clients that read nothing are dropped:\n#{@srv.log}"
  ensure
    stalled&.each(&:close)
  end
end
