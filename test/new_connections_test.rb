# frozen_string_literal: true

require "test_helper"
require "json"

# Which worker takes a new connection, and when it is served: at once,
# whatever the connections that wait for their request (a unix socket
# client that writes when the socket is writable, TCP without
# TCP_DEFER_ACCEPT as on macOS and the BSDs, a browser's preconnect), and
# without starving the requests that came late (a slow app, clients that
# keep connecting). bench/late_writers.rb measures the same against an
# earlier build and the peers, and how a burst of keep-alive clients
# spreads over the workers.
class NewConnectionsTest < Minitest::Test
  REQUEST = "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"

  def teardown
    @srv&.stop
  end

  # A client that connected and has sent nothing yet (a browser's
  # preconnect, a client that writes once the socket is writable) sits on
  # the header timer of the worker that took it. That alone made the worker
  # stop accepting for a tick of the coarse clock (1-4 ms) after each
  # connection it took: with one such client per worker, every new
  # connection waited in the backlog. Timed against the same connections
  # without those clients, rounds alternating, so that a loaded machine
  # slows both alike.
  def test_a_client_that_has_not_written_yet_does_not_hold_up_new_connections
    @srv = ServerProcess.new("env.ru", workers: 2)
    assert wait_until { @srv.worker_pids.size == 2 }, "workers not up"
    sockets = -> { @srv.worker_pids.sum { |pid| socket_count(pid) } }
    base = sockets.call
    with = []
    without = []
    6.times do
      without.concat(Array.new(25) { exchange(@srv.tcp) })
      quiet = Array.new(2) { @srv.unix }
      assert wait_until { sockets.call == base + 2 }, "the quiet clients were not accepted"
      with.concat(Array.new(25) { exchange(@srv.tcp) })
      quiet.each(&:close)
      assert wait_until { sockets.call == base }, "the quiet clients' connections stay open"
    end
    # The 75th percentile: a pause after each accept delays the connections
    # that come while both workers are out, about half of them.
    slower = pct(with, 75) - pct(without, 75)
    assert_operator slower, :<, 0.001, "beside a client that sent nothing yet, a new connection waited " \
                                       "#{(slower * 1000).round(2)} ms more (75th percentile)"
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
    # In the backlog once connected (the worker's one thread is in the app);
    # said by /stats where the build can read a listen queue (not the
    # portable build, not macOS: there the backlog shows as null)
    assert wait_until { [4, nil].include?(unix_backlog(control)) }, "backlog #{unix_backlog(control)}"
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

  # What decides which worker takes a new connection is counted in the
  # scoreboard's head (workers, their connections, those asleep waiting for
  # one): an engine counts itself and its connections in and takes them
  # back when it closes, and the master takes back the part of a worker
  # that died (a burst of keep-alive clients spread over the workers is
  # measured by bench/late_writers.rb --burst: which worker the kernel
  # wakes first depends on the CPUs).
  def test_the_scoreboard_head_counts_workers_and_connections
    Dir.mktmpdir do |dir|
      path = File.join(dir, "s.sock")
      listener = UNIXServer.new(path)
      sb = Oribi::Scoreboard.new(4)
      assert_equal({ workers: 0, conns: 0, waiting: 0 }, sb.head)
      serve = lambda do |row, clients|
        engine = Oribi::Engine.new([listener.fileno], Oribi::Config.new.engine_options.merge(multiprocess: true, started_ms: 0))
        engine.attach_scoreboard(sb, row)
        clients.each { |c| c.write(REQUEST) }
        clients.size.times { refute_nil engine.next_request }
        engine
      end
      clients = Array.new(2) { UNIXSocket.new(path) }
      engine = serve.call(2, clients)
      assert_equal({ workers: 1, conns: 2, waiting: 0 }, sb.head)
      engine.close
      assert_equal({ workers: 0, conns: 0, waiting: 0 }, sb.head, "a closed engine still counted")
      sb.release(2)
      assert_equal({ workers: 0, conns: 0, waiting: 0 }, sb.head, "a release after the close took back more")

      # A worker that dies with its connections open: the master's release.
      # A fork of this process, which has used the engine: libkqueue (kqueue
      # on Linux) keeps a thread and locks that a fork does not survive (the
      # child hung on a lock), where a server's master never runs an engine.
      # macOS and the BSDs give a child no kqueue at all; epoll builds test it.
      skip "libkqueue does not survive a fork of a process that used it" if Oribi::EVENT_LOOP.include?("libkqueue")
      clients = Array.new(3) { UNIXSocket.new(path) }
      pid = fork do
        serve.call(1, clients)
        exit!(0)
      end
      Process.wait(pid)
      assert_equal({ workers: 1, conns: 3, waiting: 0 }, sb.head)
      sb.release(1)
      assert_equal({ workers: 0, conns: 0, waiting: 0 }, sb.head)
    ensure
      clients&.each(&:close)
      listener&.close
    end
  end

  private

  # Seconds from the connect (sock, just opened) to the response's end.
  def exchange(sock)
    t = now
    sock.write(REQUEST)
    assert_equal 200, HTTPClient.read_response(sock, timeout: 10).status
    now - t
  ensure
    sock.close
  end

  def pct(a, p) = a.sort[a.size * p / 100]

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
