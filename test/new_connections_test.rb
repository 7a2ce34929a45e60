# frozen_string_literal: true

require "test_helper"
require "json"

# When a new connection is served: without starving the requests that
# came late (a slow app, clients that keep connecting). bench/late_writers.rb
# measures the same against an earlier build and the peers.
class NewConnectionsTest < Minitest::Test
  def teardown
    @srv&.stop
  end

  # One worker with a kept-alive client (so it takes turns at the backlog),
  # a request whose bytes came after its connect, and new connections
  # queued behind it in the backlog while the worker is in the app: the
  # backlog and the queue take turns, so the late request is served after
  # one of them at most. (Each went to the head of the queue in turn for as
  # long as the backlog was not empty: with clients that keep connecting it
  # never is, and a 5 ms app had a p99 of 100-600 ms.) Which is served when
  # is the scheduler's order, whatever the machine's load.
  def test_a_request_that_came_late_is_not_starved_by_the_backlog
    dir = Dir.mktmpdir("oribi-control")
    control = "unix://#{dir}/control.sock"
    @srv = ServerProcess.new("slow.ru", "--control", control, workers: 1, tcp: false)
    assert wait_until { @srv.worker_pids.size == 1 }, "no worker"
    worker = @srv.worker_pids.first
    kept = @srv.unix
    kept.write("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    assert_equal 200, HTTPClient.read_response(kept).status
    base = socket_count(worker)
    late = @srv.unix
    assert wait_until { socket_count(worker) == base + 1 }, "the late client was not accepted"
    busy = @srv.unix
    busy.write("GET /?sleep=1.0 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    assert wait_until { @srv.log.include?("sleeping 1.0") }, "the worker is not in the app"
    late.write(slow_request)
    queued = Array.new(4) { @srv.unix.tap { |s| s.write(slow_request) } }
    assert wait_until { unix_backlog(control) == 4 }, "backlog #{unix_backlog(control)}"
    assert_equal 200, HTTPClient.read_response(busy, timeout: 20).status
    order = Queue.new
    [[:late, late], *queued.each_with_index.map { |q, i| [i, q] }].map do |name, sock|
      Thread.new { order << [name, HTTPClient.read_response(sock, timeout: 20).status] }
    end.each(&:join)
    served = Array.new(5) { order.pop }
    assert_equal [200], served.map(&:last).uniq
    assert_operator served.map(&:first).index(:late), :<=, 1, "served in the order #{served.map(&:first)}"
  ensure
    [kept, late, busy, *queued].each { |s| s&.close }
    FileUtils.rm_rf(dir) if dir
  end

  private

  def slow_request = "GET /?sleep=0.05 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"

  # Connections waiting in the unix listener's backlog, as the master's
  # stats say.
  def unix_backlog(control)
    sock = UNIXSocket.new(control.delete_prefix("unix://"))
    stats = JSON.parse(HTTPClient.request(sock, "/stats").body)
    stats["listeners"].find { |l| l["uri"].start_with?("unix") }["backlog"]
  ensure
    sock&.close
  end
end
