# frozen_string_literal: true

require "test_helper"
require "nginx_proxy"

# A graceful stop under load (docs/SIGNALS.md): every request that reached
# the listen backlog before the master closed its listeners is answered,
# whether or not keep-alive clients keep every app thread busy, over TCP and
# unix sockets, with one and several threads; the workers share the backlog;
# the keep-alive requests in flight finish and say connection: close.
class DrainTest < Minitest::Test
  WORKERS = 2
  SLEEP = { 20 => 0.1, 50 => 0.04, 200 => 0.01 }.freeze # app time per request, by queue length

  # Keep-alive clients: each sends requests on one connection until the
  # server says close. Returns their threads; each one's value is its
  # statuses (:eof for a connection closed under a request sent on it).
  def busy_clients(srv, transport, n, secs)
    n.times.map do
      s = srv.public_send(transport)
      Thread.new do
        statuses = []
        loop do
          s.write("GET /?sleep=#{secs} HTTP/1.1\r\nHost: t\r\n\r\n")
          res = HTTPClient.read_response(s, timeout: 20)
          statuses << (res ? res.status : :eof)
          break if res.nil? || res["connection"] == "close"
        end
        statuses
      rescue SystemCallError, IOError => e
        statuses << e.class
      ensure
        s.close
      end
    end
  end

  # One request on each of n new connections, nothing read yet.
  def queue_requests(srv, transport, n, secs)
    n.times.map do |i|
      srv.public_send(transport).tap { |s| s.write("GET /?sleep=#{secs}&n=#{i} HTTP/1.1\r\nHost: t\r\n\r\n") }
    end
  end

  # busy: how many keep-alive clients (true: two per app thread); signal:
  # the graceful one sent to the master
  def drain(transport:, threads:, queued:, busy: true, signal: :TERM)
    secs = SLEEP.fetch(queued)
    srv = ServerProcess.new("slow.ru", "-t", threads.to_s, workers: WORKERS)
    capacity = WORKERS * threads
    keepalive = busy ? busy_clients(srv, transport, busy == true ? 2 * capacity : busy, secs) : []
    assert wait_until { srv.log.scan("sleeping").size >= capacity }, srv.log if busy
    started = srv.log.scan("sleeping").size
    clients = queue_requests(srv, transport, queued, secs)
    # TERM once the workers have moved on to further requests (a worker
    # caught between two requests behaves otherwise than one in the app)
    assert wait_until { srv.log.scan("sleeping").size >= started + capacity }, srv.log if busy
    Process.kill(signal, srv.pid)
    responses = clients.map do |s|
      HTTPClient.read_response(s, timeout: 20)
    rescue SystemCallError => e
      e.class
    ensure
      s.close
    end
    statuses = responses.map { |r| r.respond_to?(:status) ? r.status : r.inspect }
    assert_equal [200] * queued, statuses, "#{statuses.count(200)} of #{queued} queued requests answered"
    keepalive.each do |t|
      seen = t.value
      assert_equal [200] * seen.size, seen, "a keep-alive client's requests: #{seen.inspect}"
    end
    status = srv.wait_exit(20)
    assert status&.success?, "exit status #{status.inspect}\n#{srv.log}"
    # The backlog is shared: both workers answered part of it. (A worker
    # that hoards takes it all at once; on a busy machine one worker may
    # get the CPU less often, so the bound on the smaller share is loose.)
    per_worker = responses.map { |r| r.body[/pid (\d+)/, 1] }.tally
    assert_equal WORKERS, per_worker.size, "one worker took the whole backlog: #{per_worker.values}"
    assert_operator per_worker.values.min, :>=, queued / 10, "backlog split #{per_worker.values}"
  ensure
    srv&.stop
  end

  %i[tcp unix].each do |transport|
    [1, 4].each do |threads|
      [20, 50, 200].each do |queued|
        define_method("test_term_answers_#{queued}_queued_over_#{transport}_with_#{threads}_threads_beside_keepalive_clients") do
          drain(transport: transport, threads: threads, queued: queued)
        end
      end
    end
    %i[INT QUIT].each do |signal|
      define_method("test_#{signal.downcase}_answers_20_queued_over_#{transport}_beside_keepalive_clients") do
        drain(transport: transport, threads: 1, queued: 20, signal: signal)
      end
    end
    define_method("test_term_answers_20_queued_over_#{transport}_without_keepalive_clients") do
      drain(transport: transport, threads: 1, queued: 20, busy: false)
    end
  end

  # Every connection busy: 50 keep-alive clients on 2 single-threaded workers.
  def test_term_answers_queued_requests_beside_50_keepalive_clients
    drain(transport: :unix, threads: 1, queued: 20, busy: 50)
  end

  # How Oribi is deployed: nginx with an upstream keep-alive pool in front.
  # Requests nginx forwarded before the stop are answered, on its kept-alive
  # upstream connections or on new ones in the backlog.
  def test_term_behind_nginx_answers_every_request_nginx_forwarded
    skip "nginx is not installed" unless NginxProxy.available?
    srv = ServerProcess.new("slow.ru", workers: WORKERS, tcp: false)
    proxy = NginxProxy.new(srv.sock, keepalive: 32)
    stop = false
    busy = Array.new(4) do
      s = proxy.tcp
      Thread.new do
        seen = []
        until stop
          s.write("GET /?sleep=0.1 HTTP/1.1\r\nHost: t\r\n\r\n")
          seen << HTTPClient.read_response(s, timeout: 20)&.status
        end
        seen
      ensure
        s.close
      end
    end
    assert wait_until { srv.log.scan("sleeping").size >= 2 * WORKERS }, srv.log
    clients = Array.new(50) { |i| proxy.tcp.tap { |s| s.write("GET /?sleep=0.04&n=#{i} HTTP/1.1\r\nHost: t\r\n\r\n") } }
    # nginx forwarded them once the workers have started on some (it opens
    # the upstream connections for all of them in one go)
    assert wait_until(timeout: 10) { srv.log.scan("sleeping 0.04").size >= 2 }, srv.log
    stop = true
    Process.kill(:TERM, srv.pid)
    statuses = clients.map { |s| HTTPClient.read_response(s, timeout: 20)&.status.tap { s.close } }
    assert_equal [200] * 50, statuses, "#{statuses.count(200)} of 50 answered\n#{proxy.log.lines.grep(/error|upstream/).last(5).join}"
    busy.each { |t| assert_equal [200] * t.value.size, t.value }
    assert srv.wait_exit(20)&.success?, srv.log
  ensure
    stop = true
    proxy&.stop
    srv&.stop
  end

  # The drain takes what was queued when it began: clients that keep
  # connecting (through a proxy, say) cannot keep the server from stopping.
  def test_term_ends_although_clients_keep_connecting
    # backlog 16: where the kernel does not tell the queue's length (the
    # portable build), the drain takes up to the backlog limit
    srv = ServerProcess.new("slow.ru", "--shutdown-timeout", "20", "--backlog", "16", workers: WORKERS, tcp: false)
    stop = false
    answered = 0
    flood = Array.new(4) do
      Thread.new do
        until stop
          begin
            s = srv.unix
            s.write("GET /?sleep=0.05 HTTP/1.1\r\nHost: t\r\n\r\n")
            answered += 1 if HTTPClient.read_response(s, timeout: 20)&.status == 200
            s.close
          rescue SystemCallError, IOError
            nil # refused once the workers closed their listeners
          end
        end
      end
    end
    assert wait_until { answered >= 8 }
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    Process.kill(:TERM, srv.pid)
    status = srv.wait_exit(20)
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t
    assert status&.success?, "exit status #{status.inspect} after #{took.round(1)} s\n#{srv.log.lines.grep(/oribi/).last(3).join}"
    assert_operator took, :<, 5, "the drain went on while clients kept connecting"
  ensure
    stop = true
    flood&.each(&:join)
    srv&.stop
  end
end
