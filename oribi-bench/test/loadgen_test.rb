# frozen_string_literal: true

require "minitest/autorun"
require "oribi/loadgen"
require "socket"
require "fileutils"
require "timeout"
require "tmpdir"
require_relative "support/tiny_server"

# Oribi::Loadgen against tiny Ruby servers (threads of this process: the
# load generator runs without the GVL) that answer in every way a real
# server may: keep-alive, Connection: close, chunked, close-delimited,
# slow, wrong, or not at all.
class LoadgenTest < Minitest::Test
  REQUEST = "GET / HTTP/1.1\r\nHost: test\r\n\r\n"
  HELLO = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
  LIMIT = 30 # seconds: no test may hang the suite

  def serve(kind, handler, **opts)
    server = TinyServer.new(kind, **opts, &handler)
    yield server
  ensure
    server&.close
  end

  def run_load(target, **opts, &block)
    Timeout.timeout(LIMIT) do
      Oribi::Loadgen.run({ request: REQUEST, threads: 2, connections: 4, timeout: 5 }
                           .merge(target).merge(opts), &block)
    end
  end

  def no_errors
    { connect: 0, read: 0, write: 0, timeout: 0, parse: 0, tls: 0 }
  end

  # Request-count mode: every attempt ends completed or as one error.
  def assert_accounted(count, result)
    assert_equal count, result[:requests] + result[:errors].values.sum, result.inspect
  end

  def keepalive_handler
    ->(sock, _head, _i) { sock.write(HELLO) && :keep }
  end

  def test_keepalive_over_unix_socket_reuses_connections
    serve(:unix, keepalive_handler) do |s|
      r = run_load(s.target, requests: 300)
      assert_equal 300, r[:requests]
      assert_equal no_errors, r[:errors]
      assert_equal({ 200 => 300 }, r[:status])
      assert_equal 4, s.accepted, "one connection per loadgen connection"
      assert_equal 300 * REQUEST.bytesize, r[:bytes_out]
      assert_equal 300 * HELLO.bytesize, r[:bytes_in]
      lat = r[:latency]
      order = lat.values_at(:min, :p50, :p90, :p95, :p99, :p999, :max)
      assert_equal order.sort, order
      assert_operator lat[:min], :<=, lat[:mean]
      assert_operator lat[:mean], :<=, lat[:max]
      assert_operator r[:elapsed], :>, 0
    end
  end

  def test_connection_close_from_server_reconnects_transparently
    # Unicorn's way: every response says close, then the socket is closed.
    handler = lambda do |sock, _h, _i|
      sock.write("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
      :close
    end
    serve(:tcp, handler) do |s|
      r = run_load(s.target, requests: 200, keepalive: true)
      assert_equal 200, r[:requests], r.inspect
      assert_equal no_errors, r[:errors]
      assert_equal 200, s.accepted
    end
  end

  def test_request_on_a_connection_closed_before_any_response_is_retried_once
    # The second request of each connection meets a close, as when a
    # server's idle timeout fires while the request is on its way: the
    # request is sent again on a new connection (RFC 9112 9.3.1).
    handler = ->(sock, _h, i) { i.zero? ? sock.write(HELLO) && :keep : :close }
    serve(:tcp, handler) do |s|
      r = run_load(s.target, requests: 5, connections: 1, threads: 1)
      assert_equal 5, r[:requests], r.inspect
      assert_equal no_errors, r[:errors]
      assert_equal 4, r[:retried], r.inspect
    end
  end

  def test_a_retry_is_made_only_once
    handler = ->(sock, _h, i) { i.zero? && sock.write(HELLO) ? :keep : :close }
    always_close = ->(_sock, _h, _i) { :close }
    serve(:tcp, always_close) do |s|
      r = run_load(s.target, requests: 3, connections: 1, threads: 1)
      assert_equal 3, r[:errors][:read], r.inspect
      assert_equal 0, r[:retried], "a fresh connection is not retried"
    end
    serve(:tcp, handler) do |s|
      r = run_load(s.target, requests: 2, connections: 1, threads: 1, request: "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n")
      assert_equal 1, r[:errors][:read], "POST is not idempotent: #{r.inspect}"
      assert_equal 0, r[:retried]
    end
  end

  def test_idle_connection_closed_by_the_server_is_reopened_without_spinning
    # Open loop at 4/s on one connection, the server closing a connection
    # idle for 100 ms: every send finds its connection closed.
    handler = lambda do |sock, _h, _i|
      sock.write(HELLO)
      sock.wait_readable(0.1) ? :keep : :close
    end
    serve(:tcp, handler) do |s|
      cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
      r = run_load(s.target, rate: 4, duration: 2, threads: 1, max_connections: 1)
      cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu
      assert_equal 8, r[:requests] + r[:dropped], r.inspect
      assert_equal no_errors, r[:errors]
      assert_operator cpu, :<, 0.5, "CPU seconds for 8 requests in 2 s"
    end
  end

  def test_http10_server_without_keepalive
    handler = ->(sock, _h, _i) { sock.write("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok") && :close }
    serve(:unix, handler) do |s|
      r = run_load(s.target, requests: 50)
      assert_equal 50, r[:requests], r.inspect
      assert_equal 50, s.accepted
    end
  end

  def test_keepalive_false_opens_a_connection_per_request
    serve(:tcp, keepalive_handler) do |s|
      r = run_load(s.target, requests: 100, keepalive: false)
      assert_equal 100, r[:requests]
      assert_equal no_errors, r[:errors]
      assert_equal 100, s.accepted
    end
  end

  def test_chunked_response_split_over_many_writes
    body = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" \
           "5;name=value\r\nhello\r\n1A\r\n#{'x' * 26}\r\n0\r\nX-Trailer: yes\r\n\r\n"
    handler = lambda do |sock, _h, i|
      if i < 3 # the first requests of each connection arrive byte by byte
        body.each_char { |ch| sock.write(ch) && sleep(0.0005) }
      else
        sock.write(body)
      end
      :keep
    end
    serve(:tcp, handler) do |s|
      r = run_load(s.target, requests: 60, connections: 2)
      assert_equal 60, r[:requests], r.inspect
      assert_equal no_errors, r[:errors]
      assert_equal 2, s.accepted, "chunked bodies keep the connection"
      assert_equal 60 * body.bytesize, r[:bytes_in]
    end
  end

  def test_close_delimited_body_ends_at_eof
    handler = lambda do |sock, _h, _i|
      sock.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
      sock.write("body until the end")
      :close
    end
    serve(:unix, handler) do |s|
      r = run_load(s.target, requests: 40)
      assert_equal 40, r[:requests], r.inspect
      assert_equal no_errors, r[:errors]
    end
  end

  def test_coding_after_chunked_reads_until_close
    # RFC 9112 6.3: a final coding other than chunked is framed by the close
    handler = lambda do |sock, _h, _i|
      sock.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\nnot the end")
      :close
    end
    serve(:unix, handler) do |s|
      r = run_load(s.target, requests: 20)
      assert_equal 20, r[:requests], r.inspect
      assert_equal no_errors, r[:errors]
      assert_equal 20, s.accepted
    end
  end

  def test_chunked_with_connection_close_reconnects
    handler = lambda do |sock, _h, _i|
      sock.write("HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
      :close
    end
    serve(:tcp, handler) do |s|
      r = run_load(s.target, requests: 20)
      assert_equal 20, r[:requests], r.inspect
      assert_equal no_errors, r[:errors]
      assert_equal 20, s.accepted
    end
  end

  def test_large_request_and_large_response
    # 1 MiB each way: partial sends (EPOLLOUT) and bodies over many reads.
    payload = "y" * (1 << 20)
    request = "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: #{payload.bytesize}\r\n\r\n#{payload}"
    response = "HTTP/1.1 200 OK\r\nContent-Length: #{payload.bytesize}\r\n\r\n#{payload}"
    handler = lambda do |sock, head, _i|
      got = head.bytesize - head.index("\r\n\r\n") - 4
      got += sock.readpartial(65_536).bytesize while got < payload.bytesize
      sock.write(response)
      :keep
    end
    serve(:tcp, handler) do |s|
      r = run_load(s.target, request: request, requests: 20, connections: 2)
      assert_equal 20, r[:requests], r.inspect
      assert_equal 20 * request.bytesize, r[:bytes_out]
      assert_equal 20 * response.bytesize, r[:bytes_in]
    end
  end

  def test_interim_responses_head_and_bodyless_statuses
    handler = lambda do |sock, head, i|
      if head.start_with?("HEAD")
        sock.write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n") # no body: it is HEAD
      elsif i.even?
        sock.write("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")
      else
        sock.write("HTTP/1.1 204 No Content\r\n\r\n")
      end
      :keep
    end
    serve(:tcp, handler) do |s|
      r = run_load(s.target, requests: 40, connections: 1)
      assert_equal({ 201 => 20, 204 => 20 }, r[:status])
      head = run_load(s.target, request: "HEAD / HTTP/1.1\r\nHost: t\r\n\r\n", requests: 10,
                                connections: 1)
      assert_equal({ 200 => 10 }, head[:status], head.inspect)
      assert_equal no_errors, head[:errors]
    end
  end

  def test_status_codes_are_counted
    codes = [200, 404, 503]
    handler = lambda do |sock, _h, i|
      code = codes[i % 3]
      sock.write("HTTP/1.1 #{code} X\r\nContent-Length: 0\r\n\r\n")
      :keep
    end
    serve(:unix, handler) do |s|
      r = run_load(s.target, requests: 90, connections: 1)
      assert_equal({ 200 => 30, 404 => 30, 503 => 30 }, r[:status])
    end
  end

  BAD_RESPONSES = {
    "garbage" => "hello there\r\n\r\n",
    "bare LF" => "HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
    "bad status" => "HTTP/1.1 20 OK\r\n\r\n",
    "status 600" => "HTTP/1.1 600 OK\r\nContent-Length: 0\r\n\r\n",
    "huge length" => "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
    "signed length" => "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
    "two lengths" => "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
    "obs-fold" => "HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 2\r\n\r\nok",
    "space before colon" => "HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok",
    "chunk size overflow" => "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" \
                             "fffffffffffffffffff\r\n",
    "chunk longer than size" => "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" \
                                "2\r\nabc\r\n0\r\n\r\n",
    "bytes after the response" => "#{HELLO}HTTP/1.1 200 OK\r\n",
    "switching protocols" => "HTTP/1.1 101 Switching Protocols\r\n\r\n",
    "status 099" => "HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n",
    "HTTP/1.2" => "HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n",
    "length and bad coding list" => "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked x\r\n\r\n0\r\n\r\n",
    "16 hex digits" => "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1#{'0' * 15}\r\nok\r\n0\r\n\r\n",
    "trailer not a field" => "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nnot a field\r\n\r\n",
    "chunk extension too long" => "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" \
                                  "2;#{'e' * 20_000}\r\nok\r\n0\r\n\r\n",
    "head too large" => "HTTP/1.1 200 OK\r\n" + "X-Pad: #{'p' * 1000}\r\n" * 80,
  }.freeze

  def test_malformed_responses_are_parse_errors
    BAD_RESPONSES.each do |name, bytes|
      handler = ->(sock, _h, _i) { sock.write(bytes) && :keep }
      serve(:tcp, handler) do |s|
        r = run_load(s.target, requests: 6, connections: 2, timeout: 2)
        assert_equal 6, r[:errors][:parse], "#{name}: #{r.inspect}"
        assert_accounted 6, r
      end
    end
  end

  def test_eof_before_the_body_ends_is_a_read_error
    handler = lambda do |sock, _h, _i|
      sock.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
      :close
    end
    serve(:unix, handler) do |s|
      r = run_load(s.target, requests: 10)
      assert_equal 10, r[:errors][:read], r.inspect
      assert_equal 0, r[:requests]
      assert_equal({ read: { 0 => 10 } }, r[:causes], "EOF has no errno")
    end
  end

  def test_refused_tcp_connections_are_counted
    probe = TCPServer.new("127.0.0.1", 0)
    port = probe.addr[1]
    probe.close
    r = run_load({ host: "127.0.0.1", port: port }, requests: 20)
    assert_equal 20, r[:errors][:connect], r.inspect
    assert_equal 0, r[:requests]
    assert_equal({ connect: { Errno::ECONNREFUSED::Errno => 20 } }, r[:causes], "refused, not EMFILE")
    assert_nil r[:latency][:p50]
  end

  def test_missing_unix_socket_is_counted_as_connect_errors
    r = run_load({ unix_path: "/nonexistent/oribi.sock" }, requests: 8)
    assert_equal 8, r[:errors][:connect]
    assert_accounted 8, r
  end

  def test_silent_server_times_out
    handler = ->(_sock, _h, _i) { sleep 10 }
    serve(:tcp, handler) do |s|
      t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      r = run_load(s.target, requests: 2, connections: 2, timeout: 0.2, series_interval: 1)
      took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
      assert_equal 2, r[:errors][:timeout], r.inspect
      assert_operator took, :<, 2
      # Timeouts are latencies over time too, as in the histogram, but
      # not responses.
      assert_equal [[0, 2]], r[:series].map { |x| [x[:count], x[:errors]] }
      assert_operator r[:series][0][:p99], :>=, 190_000
      assert_operator r[:latency][:max], :>=, 200_000
    end
  end

  def test_duration_mode_stops_on_time
    serve(:unix, keepalive_handler) do |s|
      r = run_load(s.target, duration: 0.5)
      assert_operator r[:requests], :>, 0
      # on time: not early, and late by no more than a loaded machine's
      # scheduling delay
      assert_operator r[:elapsed], :>=, 0.49
      assert_operator r[:elapsed], :<, 0.8
      assert_equal no_errors, r[:errors]
    end
  end

  def test_a_run_is_interruptible
    handler = ->(_sock, _h, _i) { sleep 10 }
    serve(:tcp, handler) do |s|
      t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      assert_raises(Timeout::Error) do
        Timeout.timeout(0.3) do
          Oribi::Loadgen.run(s.target.merge(request: REQUEST, duration: 60, timeout: 60))
        end
      end
      assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0, :<, 1.5
    end
  end

  def test_ipv6_literal
    server = TCPServer.new("::1", 0)
  rescue Errno::EADDRNOTAVAIL, Errno::EAFNOSUPPORT
    skip "no IPv6 loopback"
  else
    server.close
    serve(:tcp, keepalive_handler, host: "::1") do |s|
      r = run_load({ host: "::1", port: s.port }, requests: 20)
      assert_equal 20, r[:requests], r.inspect
      r = run_load({ host: "[::1]", port: s.port.to_s }, requests: 5)
      assert_equal 5, r[:requests], r.inspect
    end
  end

  def test_host_name_is_resolved
    serve(:tcp, keepalive_handler) do |s|
      r = run_load({ host: "localhost", port: s.port }, requests: 10)
      assert_equal 10, r[:requests], r.inspect
    end
  end

  def test_block_sees_progress_and_can_stop_the_run
    serve(:tcp, keepalive_handler) do |s|
      seen = []
      r = run_load(s.target, duration: 20) do |done, failed|
        seen << [done, failed]
        seen.size == 3 ? :stop : nil
      end
      assert_equal 3, seen.size
      assert_equal seen.sort, seen, "progress only grows"
      assert_operator seen.last[0], :>, 0
      assert_equal 0, seen.last[1]
      assert_operator r[:elapsed], :<, 5, "stopped early"
      assert_operator r[:requests], :>=, seen.last[0]
    end
  end

  def test_block_raising_ends_the_run
    serve(:tcp, keepalive_handler) do |s|
      t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      assert_raises(RuntimeError) { run_load(s.target, duration: 20) { raise "enough" } }
      assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0, :<, 5
    end
  end

  def test_open_loop_over_unix_socket_without_keepalive
    serve(:unix, ->(sock, _h, _i) { sock.write(HELLO) && :close }) do |s|
      r = run_load(s.target, rate: 500, requests: 100, keepalive: false, max_connections: 8)
      assert_equal 100, r[:requests], r.inspect
      assert_equal no_errors, r[:errors]
      assert_equal 100, s.accepted, "a connection per request"
      assert_equal 0, r[:dropped]
      # 100 sends at 500/s span 198 ms: never less; more only when sends ran
      # behind schedule on a busy machine, and then they are counted late
      assert_operator r[:attack], :>=, 0.197, "100 sends at 500/s span 198 ms"
      assert_operator r[:late], :>=, 1, "sends spanned #{r[:attack]} s, none counted late" if r[:attack] > 0.2
    end
  end

  def test_series_accounts_for_every_request
    serve(:tcp, keepalive_handler) do |s|
      r = run_load(s.target, requests: 300, series_interval: 0.01)
      assert_equal 300, r[:series].sum { |x| x[:count] }
      assert_equal 0, r[:series].sum { |x| x[:errors] }
      r[:series].reject { |x| x[:count].zero? }.each do |x|
        assert_operator x[:p50], :<=, x[:p99]
        assert_operator x[:p99], :<=, x[:max]
      end
      assert_empty run_load(s.target, requests: 10)[:series], "no series unless asked"
    end
  end

  def test_warmup_is_not_counted
    served = Queue.new
    handler = ->(sock, _h, _i) { served << 1 && sock.write(HELLO) && :keep }
    serve(:tcp, handler) do |s|
      r = run_load(s.target, duration: 0.4, warmup: 0.4, connections: 2)
      assert_operator r[:elapsed], :>=, 0.39
      assert_operator r[:elapsed], :<, 0.7, "the warm-up is not part of the run's time"
      assert_operator r[:requests], :>, 0
      # counted, served would be requests plus at most the 2 in flight at
      # the end; left out, served is more by the whole warm-up's (hundreds
      # even on a busy machine: the ratio to requests depends on the load)
      assert_operator served.size - r[:requests], :>, 10, "the warm-up's responses are left out"
    end
  end

  def test_bad_options_raise
    ok = { unix_path: "/tmp/x.sock", request: REQUEST, requests: 1 }
    assert_raises(ArgumentError) { Oribi::Loadgen.run(ok.merge(request: "")) }
    assert_raises(ArgumentError) { Oribi::Loadgen.run(ok.merge(host: "127.0.0.1", port: 80)) }
    assert_raises(ArgumentError) { Oribi::Loadgen.run(ok.merge(connections: 0)) }
    assert_raises(ArgumentError) { Oribi::Loadgen.run(ok.merge(duration: -1)) }
    assert_raises(ArgumentError) { Oribi::Loadgen.run(ok.merge(conections: 5)) }
    assert_raises(ArgumentError) { Oribi::Loadgen.run(request: REQUEST, requests: 1) }
    assert_raises(Oribi::Loadgen::Error) do
      Oribi::Loadgen.run(host: "no-such-host.invalid", port: 80, request: REQUEST, requests: 1)
    end
    # getaddrinfo would take 99999 modulo 65536 and connect elsewhere.
    %w[99999 0 65536 8x].each do |port|
      e = assert_raises(Oribi::Loadgen::Error, port) do
        Oribi::Loadgen.run(host: "127.0.0.1", port: port, request: REQUEST, requests: 1)
      end
      assert_match(/bad port/, e.message)
    end
  end

  # The engine has no defaults of its own: run fills them in from
  # Oribi::Bench::OPTIONS, and engine_run refuses a run that leaves one out.
  def test_the_defaults_are_the_option_tables
    full = Oribi::Bench.run_defaults({}).merge(unix_path: "/tmp/x.sock", request: REQUEST)
    assert_equal Oribi::Bench::OPTIONS.defaults.values_at(:threads, :connections, :duration, :max_connections),
                 full.values_at(:threads, :connections, :duration, :max_connections)
    %i[threads connections timeout keepalive].each do |key|
      e = assert_raises(ArgumentError) { Oribi::Loadgen.engine_run(full.except(key)) }
      assert_equal "missing :#{key}", e.message
    end
    e = assert_raises(ArgumentError) { Oribi::Loadgen.engine_run(full.except(:max_connections).merge(rate: 10)) }
    assert_equal "missing :max_connections", e.message
    refute Oribi::Bench.run_defaults(requests: 5).key?(:duration), "-n alone runs until the count"
  end
end
