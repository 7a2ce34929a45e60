# frozen_string_literal: true

require "test_helper"
require "json"

# io_threads (Puma 8's max_io_threads): a request the app marks as waiting
# on IO (env["puma.mark_as_io_bound"].call, as in Puma) stops counting
# against `threads`, and up to io_threads more such requests run beside the
# pool, so that requests waiting on an upstream do not hold the pool from
# the rest (docs/THREADS.md). Unmarked requests count as before.
class IoThreadsTest < Minitest::Test
  def teardown
    @srv&.stop
  end

  TOKEN = "t0ken"

  def start(*args)
    @control = free_port
    @srv = ServerProcess.new("marked_waits.ru", *args, "--control", "tcp://127.0.0.1:#{@control}",
                             "--control-token", TOKEN, workers: 1)
  end

  def control(path)
    sock = TCPSocket.new("127.0.0.1", @control)
    HTTPClient.request(sock, path, headers: { "Authorization" => "Bearer #{TOKEN}" }).body
  ensure
    sock&.close
  end

  def assert_in_app(n) = assert_match(/(wait begun\n.*){#{n}}/m, @srv.log_until(/(wait begun\n.*){#{n}}/m))

  def get(path, timeout: 10) = HTTPClient.read_response(@srv.send_gets([path]).first, timeout: timeout)

  # Two threads, 20 extra for marked requests: 20 marked one-second waits
  # all end within about a second, and a hello beside them is answered at
  # once. Without io_threads they would take ten seconds, two at a time.
  def test_marked_waits_run_beside_the_pool
    start("-t", "2", "--io-threads", "20")
    t = now
    waits = @srv.send_gets(Array.new(20) { "/wait?marked=1" })
    assert_in_app(20)
    h = now
    assert_equal "hello offered=true", get("/").body
    assert_operator now - h, :<, 0.5, "hello waited behind the marked requests"
    assert_equal 20, JSON.parse(control("/stats"))["workers"][0]["io_bound"]
    assert_match(/^oribi_worker_requests_io_bound\{worker="0"\} 20$/, control("/metrics"))
    waits.each { |s| assert_equal "waited", HTTPClient.read_response(s, timeout: 10).body }
    assert_operator now - t, :<, 3, "20 marked waits of 1 s on 2 threads + 20 io threads"
    assert wait_until { JSON.parse(control("/stats"))["workers"][0]["io_bound"].zero? }, "io_bound counts ended requests"
  ensure
    waits&.each(&:close)
  end

  # Unmarked requests still count against threads: with both threads in
  # unmarked waits, a third request waits for one of them even though io
  # threads are idle.
  def test_unmarked_requests_count_against_threads
    start("-t", "2", "--io-threads", "4")
    waits = @srv.send_gets(%w[/wait /wait])
    assert_in_app(2)
    h = now
    assert_equal 200, get("/").status
    assert_operator now - h, :>, 0.6, "an unmarked wait did not hold its thread"
    waits.each { |s| assert_equal "waited", HTTPClient.read_response(s).body }
  ensure
    waits&.each(&:close)
  end

  # Marked beyond threads + io_threads: the rest wait their turn.
  def test_marked_requests_beyond_the_io_threads_wait
    start("-t", "1", "--io-threads", "2")
    t = now
    waits = @srv.send_gets(Array.new(6) { "/wait?marked=1" })
    waits.each { |s| assert_equal "waited", HTTPClient.read_response(s, timeout: 10).body }
    assert_operator now - t, :>, 1.9, "more than 3 marked requests ran at once"
  ensure
    waits&.each(&:close)
  end

  # Off by default, and the env offers the callable all the same, as Puma
  # 8 does without max_io_threads: apps written for it call it
  # unconditionally. Then a mark changes nothing: two marked waits on one
  # thread take their turns. A second call in one request is one mark.
  def test_off_by_default_the_mark_is_there_and_does_nothing
    start("-t", "1")
    assert_equal "hello offered=true", get("/").body
    t = now
    waits = @srv.send_gets(%w[/wait?marked=1 /wait?marked=1])
    waits.each { |s| assert_equal "waited", HTTPClient.read_response(s).body }
    assert_operator now - t, :>, 1.9, "a mark without io_threads let a request past threads"
    assert_equal "marked twice", get("/mark-twice").body
    @srv.stop
    start("-t", "1", "--io-threads", "1")
    assert_equal "marked twice", get("/mark-twice").body
    assert_equal 0, JSON.parse(control("/stats"))["workers"][0]["io_bound"], "one mark, and it ended with its request"
  ensure
    waits&.each(&:close)
  end

  # Puma's word, from a config/puma.rb
  def test_max_io_threads_from_a_puma_config
    Dir.mktmpdir do |dir|
      File.write(File.join(dir, "puma.rb"), "threads 2, 2\nmax_io_threads 20\n")
      start("-C", File.join(dir, "puma.rb"))
      t = now
      waits = @srv.send_gets(Array.new(10) { "/wait?marked=1" })
      waits.each { |s| assert_equal "waited", HTTPClient.read_response(s, timeout: 10).body }
      assert_operator now - t, :<, 3
    ensure
      waits&.each(&:close)
    end
  end
end
