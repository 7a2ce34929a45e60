# frozen_string_literal: true

require "ipaddr"
require "open3"
require "test_helper"
require_relative "haproxy_proxy"

# The PROXY protocol (haproxy's send-proxy and send-proxy-v2, an AWS NLB):
# on a proxy_protocol listener every connection opens with the header, whose
# address is the client's for REMOTE_ADDR and the access log; a connection
# without a valid one is closed unanswered (docs/HARDENING.md). Elsewhere a
# PROXY line is a bad request line, as before.
class ProxyProtocolTest < Minitest::Test
  include SharedServer
  include ServerLogs
  server "echo.ru", "--proxy-protocol", "any", "--header-timeout", "1", "--access-log", "--remote-addr-header", "X-Real-IP"

  REQUEST = "GET /pp HTTP/1.1\r\nHost: t\r\n\r\n"

  def v1(src, sport = 40_000) = "PROXY TCP#{src.include?(':') ? 6 : 4} #{src} #{src.include?(':') ? '::1' : '127.0.0.1'} #{sport} 80\r\n"

  # A v2 PROXY header (command 1) for an IPv4 or IPv6 source, with tlvs
  # after the addresses as an NLB sends them.
  def v2(src, sport = 40_000, tlvs: "".b, command: 0x21)
    ip = IPAddr.new(src)
    fam, dst = ip.ipv4? ? [0x11, IPAddr.new("127.0.0.1")] : [0x21, IPAddr.new("::1")]
    rest = ip.hton + dst.hton + [sport, 80].pack("nn") + tlvs
    "\r\n\r\n\0\r\nQUIT\n".b + [command, fam, rest.bytesize].pack("CCn") + rest
  end

  def remote_addr(res) = res.body[/^REMOTE_ADDR: (.*)$/, 1]

  # Each header on both listeners (TCP, unix), the request in the same
  # write; REMOTE_ADDR and the access log name the address it gave.
  def test_v1_and_v2_headers_give_the_clients_address
    cases = { "v1 IPv4" => [v1("192.0.2.10"), "192.0.2.10"], "v1 IPv6" => [v1("2001:db8::a"), "2001:db8::a"],
              "v2 IPv4" => [v2("192.0.2.11"), "192.0.2.11"], "v2 IPv6" => [v2("2001:db8::b"), "2001:db8::b"],
              "v2 with TLVs" => [v2("192.0.2.12", tlvs: "\x03\x00\x04abcd\xea\x00\x02xy".b), "192.0.2.12"] }
    server.each_transport do |name, open|
      cases.each do |what, (header, addr)|
        s = open.call
        s.write(header + REQUEST)
        res = HTTPClient.read_response(s)
        assert_equal 200, res&.status, "#{name} #{what}"
        assert_equal addr, remote_addr(res), "#{name} #{what}"
        assert_match(/^#{Regexp.escape(addr)} - - \[/, server.log_until(/^#{Regexp.escape(addr)} - - \[/), "#{name} #{what}")
      ensure
        s&.close
      end
    end
  end

  # UNKNOWN (v1) and LOCAL (v2: the proxy's own health check): the socket's
  # address stands.
  def test_unknown_and_local_keep_the_sockets_address
    ["PROXY UNKNOWN\r\n", "PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n", v2("192.0.2.13", command: 0x20)].each do |header|
      s = server.tcp
      s.write(header + REQUEST)
      res = HTTPClient.read_response(s)
      assert_equal "127.0.0.1", remote_addr(res), header.inspect
    ensure
      s&.close
    end
  end

  # A client that writes the header late, in pieces: the loop waits for
  # the rest (header_timeout), then serves, and the connection goes on
  # (kept alive) with the same client without another header.
  def test_a_header_split_across_writes_then_keep_alive
    { v1("192.0.2.20") => "192.0.2.20", v2("192.0.2.21") => "192.0.2.21" }.each do |header, addr|
      s = server.tcp
      s.setsockopt(:TCP, :NODELAY, true)
      s.write(header.byteslice(0, 9))
      sleep 0.05 # the shape of the input: a late second write, nothing to await
      s.write(header.byteslice(9..))
      sleep 0.05
      s.write(REQUEST)
      first = HTTPClient.read_response(s)
      s.write(REQUEST)
      second = HTTPClient.read_response(s)
      assert_equal [200, 200], [first&.status, second&.status], header.inspect
      assert_equal [addr, addr], [remote_addr(first), remote_addr(second)]
    ensure
      s&.close
    end
  end

  # The header and two requests in one packet: both served, in order.
  def test_pipelined_requests_right_after_the_header
    s = server.tcp
    s.write(v2("192.0.2.30") + REQUEST + "GET /second HTTP/1.1\r\nHost: t\r\n\r\n")
    first = HTTPClient.read_response(s)
    second = HTTPClient.read_response(s)
    assert_equal [200, 200], [first&.status, second&.status]
    assert_match(%r{^PATH_INFO: /second$}, second.body)
    assert_equal ["192.0.2.30"] * 2, [remote_addr(first), remote_addr(second)]
  ensure
    s&.close
  end

  # The header comes once, before the first request: a PROXY line after it
  # (a client behind the proxy writing its own, first or on a kept-alive
  # connection) is the request line of a bad request, never a second
  # header that would let the client choose its address.
  def test_a_second_proxy_header_is_a_bad_request
    s = server.tcp
    s.write(v1("192.0.2.70") + v1("198.51.100.66") + REQUEST)
    assert_equal 400, HTTPClient.read_response(s)&.status
    s.close
    s = server.tcp
    s.write(v1("192.0.2.71") + REQUEST)
    assert_equal "192.0.2.71", remote_addr(HTTPClient.read_response(s))
    s.write(v2("198.51.100.67") + REQUEST)
    assert_equal 400, HTTPClient.read_response(s)&.status
    refute_match(/198\.51\.100\.6[67]/, server.log)
  ensure
    s&.close
  end

  # No header, garbage, too long, a v2 length past the bound, a header
  # that never ends: each connection is closed without an answer, the log
  # says so without the client's bytes, and the worker serves on.
  def test_missing_or_bad_headers_are_refused_and_the_worker_serves_on
    pid = server_pid
    bad = {
      "no header" => REQUEST,
      "a request line with bytes of all kinds" => "GET /\x01\xff\e[31m HTTP/1.1\r\n\r\n".b,
      "a v1 line over 107 bytes" => "PROXY UNKNOWN #{'x' * 200}\r\n#{REQUEST}",
      "a v1 line with garbage" => "PROXY TCP4 192.0.2.1 127.0.0.1 99999 80\r\n#{REQUEST}",
      "a v1 IPv6 address on TCP4" => "PROXY TCP4 ::1 127.0.0.1 1 80\r\n#{REQUEST}",
      "a v2 length of 65535" => "\r\n\r\n\0\r\nQUIT\n\x21\x11\xff\xff".b + ("\0" * 100),
      "a v2 header shorter than its addresses" => "\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x08".b + ("\0" * 8) + REQUEST,
      "a v2 version 3" => "\r\n\r\n\0\r\nQUIT\n\x31\x11\x00\x0c".b + ("\0" * 12) + REQUEST,
    }
    bad.each do |what, bytes|
      s = server.tcp
      s.write(bytes)
      assert_nil read_or_nil(s), "#{what}: answered"
    ensure
      s&.close
    end
    # Cut short, then silent: closed at header_timeout (1 s here), not held.
    s = server.tcp
    s.write(v2("192.0.2.40").byteslice(0, 20))
    assert HTTPClient.closed?(s, timeout: 5), "a v2 header cut short was not closed"
    s.close
    # One line at once, then at most one every 10 s with the count.
    lines = server.log_until(/without a valid PROXY header/).lines.grep(/without a valid PROXY header/)
    refute_empty lines, server.log
    lines.each { |l| assert_match(/\Aoribi\[\d+\]: closed \d+ connection\(s\) on a proxy_protocol listener [ -~]*\n\z/, l) }
    s = server.tcp
    s.write(v1("192.0.2.41") + REQUEST)
    res = HTTPClient.read_response(s)
    assert_equal "192.0.2.41", remote_addr(res)
    assert_equal pid, res.body[/^pid: (\d+)$/, 1].to_i, "the worker was replaced"
  ensure
    s&.close
  end

  # A listener's URI says it (?proxy_protocol=v2 here, a unix one): it
  # takes that version only, and the other listener, not marked, answers
  # a PROXY line as the bad request line it is there.
  def test_per_listener_and_plain_listeners
    sock = File.join(Dir.mktmpdir("oribi-pp"), "v2.sock")
    srv = ServerProcess.new("echo.ru", "-b", "unix://#{sock}?proxy_protocol=v2", unix: false)
    listening = %r{listening on unix://#{Regexp.escape(sock)}\?proxy_protocol=v2}
    assert_match(listening, srv.log_until(listening))
    s = UNIXSocket.new(sock)
    s.write(v2("192.0.2.50") + REQUEST)
    assert_equal "192.0.2.50", remote_addr(HTTPClient.read_response(s))
    s.close
    s = UNIXSocket.new(sock)
    s.write(v1("192.0.2.51") + REQUEST)
    assert_nil read_or_nil(s), "a v1 header on a v2 listener"
    s.close
    s = srv.tcp
    s.write(v1("192.0.2.52") + REQUEST)
    res = HTTPClient.read_response(s)
    assert_equal 400, res&.status
    assert HTTPClient.closed?(s)
  ensure
    s&.close
    srv&.stop
  end

  # Sockets handed over: after a USR2 the URI the old image bound keeps its
  # parameter; a supervisor's (systemd, start_server) have none, and the
  # option marks them.
  def test_handed_over_sockets_keep_their_marks
    srv = TCPServer.new("127.0.0.1", 0)
    port = srv.addr[1]
    handover = lambda do |env, **opts|
      copy = srv.dup
      copy.autoclose = false # the Listeners close it
      env = env.transform_values { |v| v.gsub("FD", copy.fileno.to_s) }
      l = Oribi::Listeners.new([], env: env, **opts)
      [l.proxy_protocols, l.all.map(&:to_s)]
    ensure
      l&.close_sockets
    end
    assert_equal [[2], ["tcp://127.0.0.1:#{port}?proxy_protocol=v2"]],
                 handover.call({ "ORIBI_INHERIT" => "tcp://127.0.0.1:#{port}?proxy_protocol=v2=FD" }, proxy_protocol: "v1")
    assert_equal [[1], ["tcp://127.0.0.1:#{port} (proxy_protocol v1)"]],
                 handover.call({ "ORIBI_INHERIT" => "tcp://127.0.0.1:#{port}=FD" }, proxy_protocol: "v1")
    masks, names = handover.call({ "SERVER_STARTER_PORT" => "127.0.0.1:#{port}=FD" }, proxy_protocol: "any")
    assert_equal [3], masks
    assert_match(/\Atcp:\/\/127\.0\.0\.1:#{port} \(inherited fd \d+\) \(proxy_protocol any\)\z/, names.first)
  ensure
    srv&.close
  end

  def test_bad_uri_parameters_stop_the_server_with_a_line
    [["tcp://127.0.0.1:1?proxy_protocol=v3", /proxy_protocol=v3: v1, v2, any or off/],
     ["tcp://127.0.0.1:1?proxy=v1", /unknown parameter proxy: proxy_protocol is taken/]].each do |uri, message|
      out, status = Open3.capture2e(RbConfig.ruby, File.join(ROOT, "exe/oribi"), "-w", "0", "-b", uri,
                                    File.join(APPS, "echo.ru"))
      refute status.success?, uri
      assert_match(message, out)
    end
  end

  # haproxy with send-proxy in front of the server a config/puma.rb with
  # `set_remote_address proxy_protocol: :v1` starts (Puma's word for it),
  # and with send-proxy-v2 in front of a listener marked v2: the client
  # connects from 127.0.0.2, haproxy from 127.0.0.1, and the app and the
  # access log see 127.0.0.2. Before the PROXY protocol was read, every
  # request through haproxy was a 400.
  def test_haproxy_send_proxy_v1_and_v2
    skip "haproxy is not installed: the proxy test did not run" unless HaproxyProxy.available?
    dir = Dir.mktmpdir("oribi-pp")
    puma = File.join(dir, "puma.rb")
    File.write(puma, "set_remote_address proxy_protocol: :v1\n")
    v2_sock = File.join(dir, "v2.sock")
    [[["-C", puma, "--access-log"], nil, "send-proxy"],
     [["--access-log", "-b", "unix://#{v2_sock}?proxy_protocol=v2"], v2_sock, "send-proxy-v2"]].each do |args, sock, send|
      srv = ServerProcess.new("echo.ru", *args, unix: sock.nil?)
      proxy = HaproxyProxy.new(sock || srv.sock, server: send)
      s = Socket.tcp("127.0.0.1", proxy.port, "127.0.0.2", 0)
      s.write("GET /via-haproxy HTTP/1.1\r\nHost: t\r\n\r\n")
      res = HTTPClient.read_response(s)
      assert_equal 200, res&.status, "#{send}: #{res&.raw}"
      assert_equal "127.0.0.2", remote_addr(res), send
      assert_match(%r{^127\.0\.0\.2 - - \[.*"GET /via-haproxy HTTP/1\.1" 200},
                   srv.log_until(%r{^127\.0\.0\.2 - - .*via-haproxy}), send)
    ensure
      s&.close
      proxy&.stop
      srv&.stop
    end
  end

  # remote_addr_header (Puma's set_remote_address header:) counts from a
  # trusted proxy only, and the PROXY header's address is the peer it
  # judges: a client named 192.0.2.60 cannot choose REMOTE_ADDR; what the
  # proxy's own address (UNKNOWN: the socket's, 127.0.0.1) sends, counts.
  def test_remote_addr_header_from_a_trusted_peer_only
    { v1("192.0.2.60") => "192.0.2.60", "PROXY UNKNOWN\r\n" => "203.0.113.9" }.each do |header, want|
      s = server.tcp
      s.write("#{header}GET /real HTTP/1.1\r\nHost: t\r\nX-Real-IP: 203.0.113.9, 10.0.0.1\r\n\r\n")
      assert_equal want, remote_addr(HTTPClient.read_response(s)), header.inspect
    ensure
      s&.close
    end
    s = server.tcp
    s.write("PROXY UNKNOWN\r\nGET /real HTTP/1.1\r\nHost: t\r\nX-Real-IP: 203.0.113.9:80\r\n\r\n")
    assert_equal "127.0.0.1", remote_addr(HTTPClient.read_response(s)), "not an address: the peer stands"
  ensure
    s&.close
  end

  def test_the_parser_from_ruby
    assert_equal({ consumed: 43, version: 1, family: :inet, source: "192.0.2.7", source_port: 56_324,
                   destination: "127.0.0.1", destination_port: 9292 },
                 Oribi::Parser.parse_proxy("PROXY TCP4 192.0.2.7 127.0.0.1 56324 9292\r\nGET"))
    assert_equal({ incomplete: true }, Oribi::Parser.parse_proxy("PROXY TCP4 192.0.2.7"))
    assert_equal({ error: true }, Oribi::Parser.parse_proxy(v1("192.0.2.7"), :v2))
    h = Oribi::Parser.parse_proxy(v2("2001:db8::1", 7) + "GET", :v2)
    assert_equal [52, 2, :inet6, "2001:db8::1", 7], h.values_at(:consumed, :version, :family, :source, :source_port)
    assert_equal({ consumed: 28, version: 2, family: :local }, Oribi::Parser.parse_proxy(v2("192.0.2.1", command: 0x20)))
  end

  private

  def server_pid
    s = server.tcp
    s.write(v1("192.0.2.1") + REQUEST)
    HTTPClient.read_response(s).body[/^pid: (\d+)$/, 1].to_i
  ensure
    s&.close
  end

  # What the server sent before it closed: nil when nothing.
  def read_or_nil(sock)
    res = HTTPClient.read_response(sock, timeout: 5)
    res&.raw
  rescue EOFError, Errno::ECONNRESET
    nil
  end
end
