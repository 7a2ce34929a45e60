# frozen_string_literal: true

require "test_helper"
require "json"

# Responses that stay open (event streams, long bodies) do not hold the
# request pool: once the app returned a body that streams, the rest of the
# response no longer counts against `threads`, up to max_streams per worker
# (docs/THREADS.md, "Streams").
class StreamsTest < Minitest::Test
  def teardown
    @srv&.stop
  end

  TOKEN = "t0ken"

  def start(*args, **kw)
    @control = free_port
    @srv = ServerProcess.new("streams.ru", *args, "--control", "tcp://127.0.0.1:#{@control}",
                             "--control-token", TOKEN, workers: 1, **kw)
  end

  def control(path)
    sock = TCPSocket.new("127.0.0.1", @control)
    HTTPClient.request(sock, path, headers: { "Authorization" => "Bearer #{TOKEN}" }).body
  ensure
    sock&.close
  end

  def begun(n)
    assert wait_until(timeout: 10) { @srv.log.scan("stream begun").size >= n }, "#{n} streams did not begin:\n#{@srv.log}"
  end

  def get(path, timeout: 10) = HTTPClient.read_response(@srv.send_gets([path]).first, timeout: timeout)

  def events(n) = Array.new(n) { |i| "data: #{i}\n\n" }.join

  def stats = JSON.parse(control("/stats"))["workers"][0]

  # The issue's case, scaled: three threads, 30 open event streams (each and
  # call bodies), a hello answered at once beside them, every stream fed.
  # Before, the first three streams held the three threads and the rest and
  # the hello waited their turn.
  def test_streams_do_not_hold_the_pool
    start("-t", "3")
    streams = @srv.send_gets(Array.new(15) { "/sse?n=8&every=0.5" } + Array.new(15) { "/call?n=8&every=0.5" })
    begun(30)
    h = now
    assert_equal "hello", get("/").body
    assert_operator now - h, :<, 0.5, "the hello waited behind the streams"
    assert_equal 30, stats["streams"]
    assert_match(/^oribi_worker_streams\{worker="0"\} 30$/, control("/metrics"))
    streams.first(15).each { |s| assert_equal events(8), HTTPClient.read_response(s, timeout: 10).body }
    streams.last(15).each { |s| assert_equal events(8), HTTPClient.read_to_close(s).split("\r\n\r\n", 2).last }
    assert wait_until { stats["streams"].zero? }, "streams counts ended streams"
  ensure
    streams&.each(&:close)
  end

  # With one thread (the default) the worker's only thread runs the loop
  # too: a stream goes on beside it.
  def test_with_one_thread_streams_go_on_beside_it
    start
    streams = @srv.send_gets(Array.new(5) { "/sse?n=3&every=0.5" })
    begun(5)
    h = now
    assert_equal "hello", get("/").body
    assert_operator now - h, :<, 0.5, "the hello waited behind the streams"
    streams.each { |s| assert_equal events(3), HTTPClient.read_response(s, timeout: 10).body }
  ensure
    streams&.each(&:close)
  end

  # With a pool the body goes on on the thread that called the app (its
  # thread locals and its Rails executor state are the body's too).
  def test_a_pool_thread_keeps_its_own_body
    start("-t", "2")
    assert_equal "same thread", get("/who").body
  end

  # Past max_streams a stream holds its app thread as it did before, said
  # once in the log.
  def test_past_max_streams_a_stream_holds_its_thread
    start("-t", "1", "--max-streams", "2")
    streams = @srv.send_gets(Array.new(3) { "/sse?n=3&every=0.5" })
    begun(3)
    assert_match(/max_streams \(2\) reached/, @srv.log_until(/max_streams/))
    h = now
    assert_equal "hello", get("/").body
    assert_operator now - h, :>, 0.5, "the third stream did not hold the thread"
    streams.each { |s| assert_equal events(3), HTTPClient.read_response(s, timeout: 10).body }
  ensure
    streams&.each(&:close)
  end

  # A client that reads nothing makes only its own stream wait: the others
  # are fed meanwhile, and the worker keeps no more than its write limits.
  def test_a_client_that_reads_nothing_holds_only_its_own_stream
    start("-t", "1", "--write-timeout", "3")
    stalled = @srv.send_gets(["/big?n=400"]).first # 25 MiB it never reads
    begun(1)
    t = now
    streams = @srv.send_gets(Array.new(3) { "/sse?n=3&every=0.2" })
    streams.each { |s| assert_equal events(3), HTTPClient.read_response(s, timeout: 10).body }
    assert_operator now - t, :<, 2, "the streams waited for the stalled one"
    assert_operator @srv.rss_kib(@srv.worker_pids.first), :<, 120 * 1024
  ensure
    stalled&.close
    streams&.each(&:close)
  end

  # A drain gives open streams shutdown_timeout (less a second, so that the
  # worker ends them itself and exits cleanly), then closes them; a request
  # in flight meanwhile is answered.
  def test_a_drain_closes_open_streams_before_shutdown_timeout
    start("-t", "2", "--shutdown-timeout", "4")
    streams = @srv.send_gets(Array.new(4) { "/forever" })
    begun(4)
    t = now
    Process.kill(:TERM, @srv.pid)
    streams.each { |s| assert HTTPClient.closed?(s, timeout: 8), "a stream stayed open" }
    assert_operator now - t, :>, 2, "streams were closed before their grace"
    assert_equal 0, @srv.wait_exit(10)
    assert_match(/closing 4 open streams/, @srv.log)
    refute_match(/response failed/, @srv.log)
  ensure
    streams&.each(&:close)
  end
end
