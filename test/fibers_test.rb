# frozen_string_literal: true

require "test_helper"
require "json"

# fibers N (docs/FIBERS.md): a worker runs its requests as fibers under
# async's Fiber::Scheduler, so that requests that wait (sleep, Net::HTTP,
# Queue#pop, a stream between its events) do not each hold a thread. And
# Puma's fiber_per_request: a fiber per request on its thread.
class FibersTest < Minitest::Test
  def setup
    skip "the async gem is not installed (bundle group ecosystem)" unless Gem.loaded_specs.key?("async")
  end

  def teardown
    @srv&.stop
    @upstream&.close
  end

  def start(*args) = @srv = ServerProcess.new("fibers.ru", *args, workers: 1)

  def waiting(n)
    assert wait_until(timeout: 10) { @srv.log.scan("waiting").size >= n }, "#{n} requests did not begin to wait:\n#{@srv.log}"
  end

  def get(path, timeout: 10) = HTTPClient.read_response(@srv.send_gets([path]).first, timeout: timeout)

  # 200 one-second sleeps on one worker, one thread: all answered in about a
  # second, a hello at once beside them. With threads they would take 200 s.
  # /stats and /metrics count them meanwhile.
  def test_sleeping_requests_wait_together
    control = free_port
    start("--fibers", "500", "--control", "tcp://127.0.0.1:#{control}", "--control-token", "t")
    assert_match(/1 worker, .*up to 500 requests per worker as fibers \(async \d+\.\d+/, @srv.log_until(/as fibers/))
    t = now
    waits = @srv.send_gets(Array.new(200) { "/wait" })
    waiting(200)
    ask = ->(path) { HTTPClient.request(TCPSocket.new("127.0.0.1", control), path, headers: { "Authorization" => "Bearer t" }).body }
    assert_equal 200, JSON.parse(ask.("/stats"))["workers"][0]["in_app"]
    assert_match(/^oribi_worker_requests_in_app\{worker="0"\} 200$/, ask.("/metrics"))
    h = now
    assert_equal "hello multithread=true", get("/").body
    assert_operator now - h, :<, 0.5, "the hello waited behind the sleeps"
    waits.each { |s| assert_equal "waited", HTTPClient.read_response(s, timeout: 10).body }
    assert_operator now - t, :<, 4, "200 sleeps of 1 s did not run together"
  ensure
    waits&.each(&:close)
  end

  # Net::HTTP to an upstream that answers after 1 s: 50 such requests wait
  # on their sockets together.
  def test_upstream_calls_wait_together
    @upstream = TCPServer.new("127.0.0.1", 0)
    port = @upstream.addr[1]
    Thread.new do
      loop do
        c = @upstream.accept
        Thread.new(c) do |s|
          s.readpartial(4096)
          sleep 1
          s.write("HTTP/1.1 200 OK\r\ncontent-length: 8\r\nconnection: close\r\n\r\nupstream")
          s.close
        end
      end
    rescue IOError, SystemCallError
      nil # closed by teardown
    end
    start("--fibers", "100")
    t = now
    calls = @srv.send_gets(Array.new(50) { "/upstream?port=#{port}" })
    calls.each { |s| assert_equal "upstream", HTTPClient.read_response(s, timeout: 10).body }
    assert_operator now - t, :<, 3.5, "50 upstream calls of 1 s did not wait together"
  ensure
    calls&.each(&:close)
  end

  # Queue#pop waits as a fiber: the request that pushes runs meanwhile.
  # A request that waits in its fiber keeps only its own bytes (the
  # connection's buffer shrinks to them): its fields, its body and a
  # pipelined request behind it are all still there after the wait.
  def test_a_waiting_request_keeps_its_head_its_body_and_what_follows
    start("--fibers", "50")
    s = @srv.tcp
    fields = ->(r, n) { (1..n).map { |i| "X-F-#{i}: r#{r}-#{'v' * i}\r\n" }.join }
    s.write("POST /echo HTTP/1.1\r\nHost: t\r\n#{fields.(0, 30)}Content-Length: 5\r\n\r\nhello" \
            "GET /echo HTTP/1.1\r\nHost: t\r\n#{fields.(1, 3)}\r\n")
    [["POST hello", 0, 30], ["GET ", 1, 3]].each do |start, r, n|
      want = "#{start} #{(1..n).map { |i| "HTTP_X_F_#{i}=r#{r}-#{'v' * i}" }.join(' ')}"
      assert_equal want, HTTPClient.read_response(s, timeout: 10).body
    end
  ensure
    s&.close
  end

  def test_a_queue_pop_lets_the_push_run
    start("--fibers", "10")
    pop = @srv.send_gets(["/pop"]).first
    waiting(1)
    assert_equal "pushed", get("/push?v=7").body
    assert_equal "popped 7", HTTPClient.read_response(pop, timeout: 5).body
  ensure
    pop&.close
  end

  # A fiber's stream is its own: streams and a hello beside them.
  def test_streams_go_on_beside_requests
    start("--fibers", "100")
    streams = @srv.send_gets(Array.new(20) { "/sse" })
    waiting(20)
    assert_equal "hello multithread=true", get("/").body
    streams.each { |s| assert_equal "data: 0\n\ndata: 1\n\ndata: 2\n\n", HTTPClient.read_response(s, timeout: 10).body }
  ensure
    streams&.each(&:close)
  end

  # Past fibers N, requests wait their turn.
  def test_past_n_requests_wait
    start("--fibers", "2")
    t = now
    waits = @srv.send_gets(Array.new(4) { "/wait" })
    waits.each { |s| assert_equal "waited", HTTPClient.read_response(s, timeout: 10).body }
    assert_operator now - t, :>, 1.9, "more than 2 requests ran at once"
  ensure
    waits&.each(&:close)
  end

  # A drain stops requests still open after its grace, as with threads.
  def test_a_drain_ends_open_streams
    start("--fibers", "10", "--shutdown-timeout", "3")
    streams = @srv.send_gets(Array.new(3) { "/forever" })
    waiting(3)
    Process.kill(:TERM, @srv.pid)
    streams.each { |s| assert HTTPClient.closed?(s, timeout: 8), "a stream stayed open" }
    assert_equal 0, @srv.wait_exit(10)
    assert_match(/closing 3 open requests/, @srv.log)
    refute_match(/response failed|Async::Stop/, @srv.log)
  ensure
    streams&.each(&:close)
  end

  # soft_timeout sees each request's fiber: two waits past it, two lines,
  # each with where its fiber waits.
  def test_soft_timeout_logs_each_fibers_backtrace
    start("--fibers", "10", "--soft-timeout", "0.3")
    waits = @srv.send_gets(%w[/wait /wait])
    waits.each { |s| assert_equal "waited", HTTPClient.read_response(s, timeout: 10).body }
    log = @srv.log_until(/(soft_timeout: GET \/wait.*){2}/m)
    assert_equal 2, log.scan(%r{soft_timeout: GET /wait running}).size, log
    assert_match(/fibers\.ru:\d+:in `sleep'|fibers\.ru:\d+/, log)
  ensure
    waits&.each(&:close)
  end

  # Puma's fiber_per_request: what a request leaves in its fiber locals is
  # gone for the next one on the same thread; without it, it stays.
  def test_fiber_per_request_ends_fiber_locals_with_the_request
    start("--fiber-per-request")
    assert_equal "before=nil", get("/local").body
    assert_equal "before=nil", get("/local").body
    @srv.stop
    start
    get("/local")
    assert_equal 'before="set"', get("/local").body
  end
end
