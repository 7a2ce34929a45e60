# frozen_string_literal: true

require "test_helper"

# What a connection keeps once its request is answered and it waits, kept
# alive, for the next: its buffers grew for that request (a large head, a
# response the socket did not take at once) and are given back, so that an
# idle connection costs the worker at most 16 KiB whatever came before it
# (docs/HARDENING.md, "What a connection keeps"). Clients that send one
# request each and then wait must not pin megabytes apiece.
#
# The cost is the worker's RSS per further idle connection, after a first
# batch of them, read after a GC and the allocator's trim (the app's /gc):
# what the allocator and Ruby's heap keep once for such requests is not
# per connection.
class IdleMemoryTest < Minitest::Test
  PER_CONN_KIB = 16

  def setup
    skip "ASan's quarantine keeps freed memory: RSS says nothing there" if ENV["ORIBI_SANITIZE"]
    @srv = ServerProcess.new("idle_memory.ru", "-t", "1", workers: 1)
    @pid = wait_until { @srv.worker_pids.first }
    @clients = []
  end

  def teardown
    @clients&.each(&:close)
    @srv&.stop
  end

  def rss_after_gc
    assert_equal 200, HTTPClient.request(@srv.tcp, "/gc").status
    @srv.rss_kib(@pid)
  end

  # KiB of RSS each idle connection adds, from batches of per (TCP and
  # unix in turn) after a first one; the block sends a request on a new
  # connection and reads its answer.
  def kib_per_idle_connection(per)
    rss = []
    3.times do |batch|
      per.times { |i| @clients << yield(i.even? ? @srv.tcp : @srv.unix) }
      rss << rss_after_gc if batch.positive?
    end
    (rss.last - rss.first) / per / 2.0
  end

  # A response of 8 MiB is more than a socket takes at once: the rest
  # waited in the connection's write buffer while its client read late.
  # Once it is out, the buffer goes.
  def test_an_idle_connection_keeps_no_write_buffer
    kib = kib_per_idle_connection(6) do |s|
      s.write("GET /?mib=8 HTTP/1.1\r\nHost: t\r\n\r\n")
      sleep 0.15 # a client that reads late: the server's socket buffer fills first
      res = HTTPClient.read_response(s, timeout: 30)
      assert_equal 8 << 20, res.body.bytesize
      assert_nil res["connection"], "kept alive"
      s
    end
    assert_operator kib, :<=, PER_CONN_KIB, "an idle connection after an 8 MiB response holds #{kib} KiB"
    # and they serve on
    @clients.each { |s| s.write("GET / HTTP/1.1\r\nHost: t\r\n\r\n") }
    @clients.each { |s| assert_equal "ok", HTTPClient.read_response(s).body }
  end

  # An app thread builds each response head in a buffer of its own, which
  # an app's 1 MiB header field grows; between requests the thread keeps
  # no more than a usual head needs. (One app thread: several each have
  # an allocator arena, whose top glibc keeps for the thread, in use or
  # not, so their RSS says nothing of what the server holds.)
  def test_an_idle_app_thread_keeps_no_large_response_head
    rss = []
    [0, 1, 1].each do |big| # the first round with a usual head
      s = @srv.tcp
      s.write("GET /?head=#{big} HTTP/1.1\r\nHost: t\r\n\r\n")
      assert_equal big << 20, HTTPClient.read_response(s, timeout: 10)["x-big"].to_s.bytesize
      s.close
      rss << rss_after_gc
    end
    kib = rss.max - rss.first
    assert_operator kib, :<=, PER_CONN_KIB, "the app thread holds #{kib} KiB after a 1 MiB response head"
  end

  # The largest head the server accepts (a request line of 8 KiB, 64 KiB
  # of header fields) grows the read buffer; idle, the connection keeps no
  # more than a small request needs.
  def test_an_idle_connection_keeps_no_large_read_buffer
    line = "/#{'p' * 8000}"
    fields = Array.new(15) { |i| "X-F#{i}: #{'h' * 4300}\r\n" }.join
    kib = kib_per_idle_connection(100) do |s|
      s.write("GET #{line} HTTP/1.1\r\nHost: t\r\n#{fields}\r\n")
      assert_equal 200, HTTPClient.read_response(s).status
      s
    end
    assert_operator kib, :<=, PER_CONN_KIB, "an idle connection after a 72 KiB head holds #{kib} KiB"
  end
end
