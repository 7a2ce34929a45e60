# frozen_string_literal: true

require "test_helper"
require "json"
require_relative "support/websocket"

# Handing the connection to the app: full hijack, partial hijack and the
# rack.protocol upgrade, each carrying a WebSocket echo. The first frame is
# sent in the same write as the upgrade request, so it sits in the server's
# read-ahead buffer when the app takes over and must not be lost.
class HijackTest < Minitest::Test
  include SharedServer
  server "websocket.ru"

  KEY = "dGhlIHNhbXBsZSBub25jZQ=="
  ACCEPT = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" # RFC 6455 section 1.3

  def upgrade_request(path, extra = "")
    "GET #{path} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" \
      "Sec-WebSocket-Key: #{KEY}\r\nSec-WebSocket-Version: 13\r\n#{extra}\r\n"
  end

  # The handshake head, read up to its blank line and not a byte further.
  def read_head(sock)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    lines = []
    while (line = HTTPClient.read_line(sock, deadline)) && line != "\r\n"
      lines << line.chomp
    end
    status = lines.shift
    [status, lines.to_h { |l| k, v = l.split(":", 2); [k.downcase, v.strip] }]
  end

  def frame(text, opcode: WebSocket::TEXT) = WebSocket.encode(text, opcode: opcode, mask: "k3y!")

  def read_frame(sock) = WebSocket.decode(WebSocket::Reader.new(sock, Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10))

  # The whole conversation; returns the handshake headers.
  def echo_session(sock, path)
    sock.write(upgrade_request(path) + frame("first"))
    status, headers = read_head(sock)
    assert_equal "HTTP/1.1 101 Switching Protocols", status, path
    assert_equal ACCEPT, headers["sec-websocket-accept"]
    assert_equal "websocket", headers["upgrade"]&.downcase
    assert_equal "upgrade", headers["connection"]&.downcase
    assert_equal [WebSocket::TEXT, "echo: first"], read_frame(sock), "#{path}: the frame sent with the request"
    sock.write(frame("second"))
    assert_equal [WebSocket::TEXT, "echo: second"], read_frame(sock), "#{path}: a frame sent later"
    sock.write(frame("bye", opcode: WebSocket::CLOSE))
    assert_equal [WebSocket::CLOSE, "bye"], read_frame(sock)
    assert HTTPClient.closed?(sock), "#{path}: the app closes the connection"
    headers
  end

  def test_full_hijack_websocket_echo_on_both_transports
    server.each_transport do |name, open|
      s = open.call
      headers = echo_session(s, "/full")
      assert_nil headers["date"], "#{name}: only the app wrote to the socket" # the server's heads have a date
      s.close
    end
    assert_match(/pong/, HTTPClient.request(server.tcp, "/ping").body)
  end

  def test_partial_hijack_websocket_echo
    server.each_transport do |_, open|
      s = open.call
      headers = echo_session(s, "/partial")
      refute_nil headers["date"], "the server wrote the head"
      assert_nil headers["content-length"]
      s.close
    end
  end

  def test_rack_protocol_upgrade_with_a_streaming_body
    server.each_transport do |_, open|
      s = open.call
      headers = echo_session(s, "/protocol")
      assert_nil headers["content-length"]
      assert_nil headers["transfer-encoding"]
      s.close
    end
  end

  def test_many_frames_already_buffered_when_the_app_takes_over
    s = server.tcp
    frames = (1..20).map { |i| frame("m#{i}" * 50) }.join
    s.write(upgrade_request("/full") + frames)
    read_head(s)
    (1..20).each { |i| assert_equal "echo: #{"m#{i}" * 50}", read_frame(s)[1] }
    s.write(frame("", opcode: WebSocket::CLOSE))
    assert_equal WebSocket::CLOSE, read_frame(s)[0]
  ensure
    s&.close
  end

  def test_hijacked_io_is_a_socket_of_the_transport
    { tcp: "TCPSocket", unix: "UNIXSocket" }.each do |transport, cls|
      res = HTTPClient.request(server.public_send(transport), "/hijack-class")
      assert_equal "#{cls} same", res.body, "a second call returns the same IO"
    end
  end

  def test_partial_hijack_without_upgrade
    s = server.tcp
    res = HTTPClient.request(s, "/partial-200")
    assert_equal 200, res.status
    assert_equal "close", res["connection"]
    assert_nil res["content-length"]
    assert_nil res["transfer-encoding"]
    assert_equal "text/plain", res["content-type"]
    assert_equal "raw body", res.body
  ensure
    s&.close
  end

  def test_full_hijack_once_the_response_started_is_refused
    res = HTTPClient.request(server.tcp, "/late-hijack")
    assert_equal "refused: IOError", res.body
  end

  # The baseline is taken after one hijacked exchange and with the probe's
  # connection closed: what a first hijack creates once (in Ruby, or in
  # libkqueue on the kqueue build) is not a connection kept, and a probe
  # left open would count for the server until its idle timeout.
  def test_hijacked_connections_are_not_kept_by_the_server
    probe = server.tcp
    pid = HTTPClient.request(probe, "/ping").body[/\d+/].to_i
    with_probe = fd_count(pid)
    probe.close
    wait_until(timeout: 5) { fd_count(pid) < with_probe }
    base = fd_count(pid)
    hijack_and_close = lambda do
      s = server.unix
      s.write(upgrade_request("/partial"))
      read_head(s)
      s.write(frame("", opcode: WebSocket::CLOSE))
      read_frame(s)
      s.close
    end
    hijack_and_close.call
    wait_until(timeout: 5) { fd_count(pid) <= base } # its fds go, but what it made once
    before = fd_count(pid)
    10.times { hijack_and_close.call }
    wait_until(timeout: 5) { fd_count(pid) <= before }
    assert_operator fd_count(pid), :<=, before
  end

  def test_rack_protocol_lists_the_offered_protocols
    s = server.tcp
    s.write("GET /protocols HTTP/1.1\r\nHost: t\r\nUpgrade: h2c, websocket\r\nConnection: keep-alive, Upgrade\r\n\r\n")
    assert_equal '["h2c", "websocket"]', HTTPClient.read_response(s).body
    s.write("GET /protocols HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n\r\n")
    assert_equal "nil", HTTPClient.read_response(s).body, "no Connection: upgrade, no upgrade asked"
    s.write("GET /protocols HTTP/1.0\r\nUpgrade: websocket\r\nConnection: upgrade, keep-alive\r\n\r\n")
    assert_equal "nil", HTTPClient.read_response(s).body, "HTTP/1.0 cannot upgrade (RFC 9110 7.8)"
  ensure
    s&.close
  end

  def test_rack_protocol_the_request_did_not_offer_is_dropped
    s = server.tcp
    s.write("GET /nolint/x HTTP/1.1\r\nHost: t\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n")
    res = HTTPClient.read_response(s)
    assert_equal 200, res.status
    assert_nil res["upgrade"]
    assert_equal 'not upgraded ["h2c"]', res.body
    assert_match(/dropped response header "rack.protocol": not one of the protocols/, server.log_until(/rack.protocol/))
    # and without any upgrade asked
    s.write("GET /nolint/y HTTP/1.1\r\nHost: t\r\n\r\n")
    assert_equal 200, HTTPClient.read_response(s).status
    assert_match(/"rack.protocol": the request asked for no upgrade/, server.log_until(/asked for no upgrade/))
  ensure
    s&.close
  end

  # What went out on a fully hijacked connection is the app's: the status
  # the app returns is ignored (Rails returns -1, others anything), and the
  # access log must not show it as what the client got. A partial hijack's
  # head is the server's: its status is.
  HIJACK_APP = <<~'RUBY'
    run lambda { |env|
      case env["PATH_INFO"]
      when "/rails", "/ignored"
        io = env["rack.hijack"].call
        io.write("HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nhi")
        io.close
        [env["PATH_INFO"] == "/rails" ? -1 : 200, {}, []]
      when "/partial" then [101, { "upgrade" => "x", "connection" => "upgrade", "rack.hijack" => ->(io) { io.close } }, []]
      else [200, {}, ["ok"]]
      end
    }
  RUBY

  def test_the_access_log_marks_a_full_hijack_in_every_format
    Dir.mktmpdir do |d|
      app = File.join(d, "hijack.ru")
      File.write(app, HIJACK_APP)
      { "combined" => [/"GET %s HTTP\/1.1" - - "-"/, /"GET %s HTTP\/1.1" %s /],
        "ltsv" => [/\turi:%s\tprotocol:HTTP\/1.1\tstatus:-\tsize:-\t/, /\turi:%s\tprotocol:HTTP\/1.1\tstatus:%s\t/],
        "json" => [/"uri":"%s","protocol":"HTTP\/1.1","status":null,"size":"-"/, /"uri":"%s","protocol":"HTTP\/1.1","status":%s,/] }
        .each do |format, (hijacked, plain)|
        path = File.join(d, "#{format}.log")
        srv = ServerProcess.new(app, "--access-log", path, "--access-log-format", format, workers: 1)
        %w[/rails /ignored].each do |route|
          assert_equal "hi", HTTPClient.request(srv.tcp, route).body
        end
        sock = srv.tcp
        sock.write("GET /partial HTTP/1.1\r\nHost: t\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n")
        assert_equal 101, HTTPClient.read_response(sock).status
        assert_equal "ok", HTTPClient.request(srv.tcp, "/ok").body
        assert wait_until { File.read(path).lines.size == 4 }, File.read(path)
        log = File.read(path)
        %w[/rails /ignored].each do |route|
          assert_match Regexp.new(format(hijacked.source, route)), log, "#{format}: #{route}"
        end
        assert_match Regexp.new(format(plain.source, "/partial", "101")), log, format
        assert_match Regexp.new(format(plain.source, "/ok", "200")), log, format
        JSON.parse(log.lines.first) if format == "json" # still one JSON object a line
      ensure
        srv&.stop
      end
    end
  end

  # Every thread of a worker took a socket at the same moment (a burst of
  # Action Cable clients): the loop, holding its accepts while no thread
  # was free, must take the next connection once they are. Two threads,
  # two requests that each wait for the other before hijacking, so that
  # both are in the app together; then a plain request on a new connection.
  # (Found by bench/streams.rb --app broadcast: two thousand streams, a
  # worker that stopped accepting with hundreds in its backlog.)
  KEEP_APP = <<~'RUBY'
    KEPT = []
    LOCK = Mutex.new
    BOTH = ConditionVariable.new
    def both_in
      LOCK.synchronize do
        KEPT << :in
        BOTH.broadcast
        BOTH.wait(LOCK, 1) until KEPT.count(:in) >= 2
      end
    end
    # the socket taken, the thread stays a moment: the loop has seen the
    # hijack and gone back to waiting before the thread is free again
    def keep(io) = LOCK.synchronize { KEPT << io }.then { io.write("kept") }.then { sleep 0.2 }
    run lambda { |env|
      case env["PATH_INFO"]
      when "/full"
        both_in
        keep(env["rack.hijack"].call)
        [200, {}, []]
      when "/partial"
        both_in
        [200, { "rack.hijack" => method(:keep) }, []]
      else [200, {}, ["hello"]]
      end
    }
  RUBY

  def test_the_next_connection_is_taken_after_every_thread_hijacked
    Dir.mktmpdir do |d|
      File.write(app = File.join(d, "keep.ru"), KEEP_APP)
      %w[/full /partial].each do |path|
        srv = ServerProcess.new(app, "--threads", "2", workers: 1)
        kept = 2.times.map { srv.tcp.tap { |s| s.write("GET #{path} HTTP/1.1\r\nHost: t\r\n\r\n") } }
        kept.each do |s|
          assert_match(/kept\z/, read_until(s, "kept"), "#{path}: the app took the socket")
        end
        res = HTTPClient.request(srv.tcp, "/")
        assert_equal [200, "hello"], [res&.status, res&.body], "#{path}: a request after two hijacks"
      rescue Timeout::Error
        flunk "#{path}: no answer to a request after both threads hijacked\n#{srv.log}"
      ensure
        kept&.each(&:close)
        srv&.stop
      end
    end
  end

  private

  def read_until(sock, text)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    out = +""
    out << (HTTPClient.read_some(sock, 4096, deadline) or break) until out.end_with?(text)
    out
  end

  def fd_count(pid) = Dir.children("/proc/#{pid}/fd").size
end
