# frozen_string_literal: true

require "test_helper"
require "rack3_helper"
require "support/tls"
require "digest/md5"
require "json"
require "tempfile"

# TLS listeners (docs/TLS.md): bind "ssl://HOST:PORT?cert=..&key=..". The
# handshake in the worker's loop, requests over it as over plain TCP (keep-
# alive, pipelining, bodies both ways, file bodies, streams), the env says
# https; a plain request on the port gets a plain 400; files that do not do
# stop the boot with the reason.
class TLSTest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir("oribi-tls")
    @cert, @key = TLSFiles.write(@dir, "server")
  end

  def teardown
    @srv&.stop
    FileUtils.rm_rf(@dir)
  end

  def ssl_uri(port = @port, **params)
    q = { cert: @cert, key: @key }.merge(params).map { |k, v| "#{k}=#{v}" }.join("&")
    "ssl://127.0.0.1:#{port}?#{q}"
  end

  def start(app = "echo.ru", *args, workers: 1, env: {}, **params)
    @port = free_port
    @srv = ServerProcess.new(app, "-b", ssl_uri(**params), *args, workers: workers, tcp: false, env: env)
  end

  def client = TLSClient.open(@port, trust: File.read(@cert))

  def request(c, path, method: "GET", body: nil, headers: {})
    head = { "Host" => "localhost:#{@port}" }.merge(headers)
    head["Content-Length"] = body.bytesize.to_s if body
    c.write("#{method} #{path} HTTP/1.1\r\n#{head.map { |k, v| "#{k}: #{v}\r\n" }.join}\r\n#{body}")
    HTTPClient.read_response(c)
  end

  def test_requests_on_one_kept_alive_connection_say_https
    start
    assert_match(%r{listening on ssl://127\.0\.0\.1:#{@port}\S* \(TLS: CN=localhost, until \d{4}-\d\d-\d\d; OpenSSL .*; kernel TLS (offered, not used|not offered)\)},
                 @srv.log_until(/TLS:/))
    c = client
    assert_equal "http/1.1", c.ssl.alpn_protocol
    3.times do |i|
      res = request(c, "/r#{i}")
      assert_equal 200, res.status
      assert_match(%r{^PATH_INFO: /r#{i}$}, res.body)
      assert_match(/^rack\.url_scheme: https$/, res.body)
      assert_match(/^SERVER_PORT: #{@port}$/, res.body)
    end
    # no port in Host: https's
    res = request(c, "/", headers: { "Host" => "localhost" })
    assert_match(/^SERVER_PORT: 443$/, res.body)
  ensure
    c&.close
  end

  # What Rack says of the connection: https, HTTPS on; Lint agrees.
  def test_the_env_says_https
    app = File.join(@dir, "config.ru")
    File.write(app, <<~RUBY)
      use Rack::Lint
      run ->(env) { [200, {}, [[env["HTTPS"], env["rack.hijack?"], env["rack.url_scheme"]].inspect]] }
    RUBY
    start(app)
    c = client
    assert_equal '["on", true, "https"]', request(c, "/").body
  ensure
    c&.close
  end

  def test_bodies_both_ways_and_a_pipeline
    start("rack3.ru", env: Rack3Files.server_env)
    c = client
    # a file body (sendfile on plain TCP; through a buffer here), 3 MiB
    res = request(c, "/file?name=large.bin")
    assert_equal Rack3Files::LARGE.bytesize, res.body.bytesize
    assert_equal Digest::MD5.hexdigest(Rack3Files::LARGE), Digest::MD5.hexdigest(res.body)
    # a pipeline of three
    c.write("GET /file?name=small.bin HTTP/1.1\r\nHost: h\r\n\r\n" * 3)
    3.times { assert_equal Rack3Files::SMALL, HTTPClient.read_response(c).body }
    # a streamed body (the app writes to the stream), then the connection ends
    assert_equal "hello world", request(c, "/stream").body
  ensure
    c&.close
  end

  def test_a_large_request_body_and_a_large_answer_to_a_slow_reader
    start
    c = client
    body = Random.new(7).bytes(5 * 1024 * 1024)
    res = request(c, "/upload", method: "POST", body: body)
    assert_match(/^body-md5: #{Digest::MD5.hexdigest(body)}$/, res.body)
    # 4 MiB read 64 KiB at a time with pauses: the server writes as the
    # socket takes it (records pending in TLS between writes)
    @srv.stop
    start("responses.ru")
    c.close
    c = client
    c.write("GET /big HTTP/1.1\r\nHost: h\r\n\r\n")
    got = +""
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
    until got.include?("\r\n\r\n") && got.bytesize - got.index("\r\n\r\n") - 4 >= 4 * 1024 * 1024
      chunk = HTTPClient.read_some(c, 65_536, deadline) or break
      got << chunk
      sleep 0.001 if got.bytesize < 1024 * 1024 # a slow reader for the first MiB
    end
    assert_equal "y" * (4 * 1024 * 1024), got.split("\r\n\r\n", 2)[1]
  ensure
    c&.close
  end

  # nginx's answer: readable by whoever typed http:// for https://.
  def test_plain_http_on_the_port_gets_a_plain_400
    start
    s = TCPSocket.new("127.0.0.1", @port)
    s.write("GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    out = HTTPClient.read_to_close(s)
    assert_match(%r{\AHTTP/1\.1 400 Bad Request\r\n}, out)
    assert_match(/The plain HTTP request was sent to HTTPS port\n\z/, out)
    # the worker goes on
    assert_equal 200, request(client, "/").status
  ensure
    s&.close
  end

  # A handshake that never comes ends at header_timeout; garbage for a
  # record closes the connection; neither touches the others.
  def test_stalled_and_garbage_handshakes_end_and_others_go_on
    start("echo.ru", "--header-timeout", "1")
    stalled = TCPSocket.new("127.0.0.1", @port)
    stalled.write("\x16\x03\x01\x00\xff") # a record header, its body never sent
    garbage = TCPSocket.new("127.0.0.1", @port)
    garbage.write(Random.new(1).bytes(4096))
    assert_equal "", HTTPClient.read_to_close(garbage, timeout: 5).to_s.then { |o| o.start_with?("\x15") ? "" : o }
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    c = client
    assert_equal 200, request(c, "/").status
    HTTPClient.read_to_close(stalled, timeout: 5)
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - t, :<, 4, "the stalled handshake outlived header_timeout"
  ensure
    [stalled, garbage, c].each { |s| s&.close }
  end

  # A flood of new connections, each a full handshake (the costly part of
  # TLS, on the loop's thread), does not starve a client already served:
  # its requests are answered meanwhile, none slower than the bound.
  def test_a_handshake_flood_does_not_starve_a_served_client
    start("env.ru")
    c = client
    flood = IO.popen([RbConfig.ruby, File.join(ROOT, "exe/oribi"), "bench", "--no-keepalive", "-c", "200", "-T", "1",
                      "-d", "4s", "--insecure", "--json", "https://127.0.0.1:#{@port}/"])
    # measured while the flood runs (4 s of it, these 3)
    times = []
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 3
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      assert_equal 200, request(c, "/").status
      times << Process.clock_gettime(Process::CLOCK_MONOTONIC) - t
      sleep 0.02 # the served client's own pace, not a synchronisation
    end
    report = JSON.parse(flood.read)
    assert_operator report["requests"], :>, 500, "the flood did not run"
    puts "\nduring #{report['requests']} handshakes (#{report['rate'].round}/s): #{times.size} requests kept alive, " \
         "slowest #{(times.max * 1000).round} ms, median #{(times.sort[times.size / 2] * 1000).round(1)} ms"
    assert_operator times.max, :<, 1.0, "a request of a served client waited behind the handshakes"
  ensure
    flood&.close
    c&.close
  end

  # A TLS 1.2 client that asks to renegotiate (openssl s_client's R) is
  # refused with the no_renegotiation alert: renegotiation is a CPU lever
  # for an attacker and a source of old bugs; the worker serves on.
  def test_renegotiation_is_refused
    start("env.ru")
    script = "GET / HTTP/1.1\r\nHost: h\r\n\r\n"
    o = Tempfile.new("s_client")
    r, w = IO.pipe
    pid = Process.spawn("openssl", "s_client", "-tls1_2", "-connect", "127.0.0.1:#{@port}", in: r, %i[out err] => o.path)
    r.close
    w.write(script)
    assert wait_until(timeout: 5) { File.read(o.path).include?("HTTP/1.1 200") }, File.read(o.path)
    w.write("R\n")
    assert wait_until(timeout: 5) { File.read(o.path).include?("no renegotiation") }, File.read(o.path)
    assert_equal 200, request(client, "/").status
  ensure
    w&.close
    Process.kill(:TERM, pid) if pid
    Process.wait(pid) if pid
    o&.close!
  end

  # More than one certificate: repeated cert=&key= pairs, the first the
  # listener's own, the others presented to a client that names theirs.
  def test_certificates_by_sni
    other_cert, other_key = TLSFiles.write(@dir, "other", TLSFiles.self_signed(cn: "api.example.test"))
    @port = free_port
    uri = "ssl://127.0.0.1:#{@port}?cert=#{@cert}&key=#{@key}&cert=#{other_cert}&key=#{other_key}"
    @srv = ServerProcess.new("env.ru", "-b", uri, workers: 1, tcp: false)
    assert_match(/\(TLS: CN=localhost, until [\d-]+, and 1 more by SNI;/, @srv.log_until(/TLS:/))
    cn = lambda do |name|
      c = TLSClient.open(@port, sni: name)
      c.peer_cert.subject.to_s.tap do
        assert_equal 200, request(c, "/").status
        c.close
      end
    end
    assert_equal "/CN=api.example.test", cn.("api.example.test")
    assert_equal "/CN=localhost", cn.("localhost")
    assert_equal "/CN=localhost", cn.("unknown.example.test")
    e = assert_raises(ArgumentError) { Oribi::Listeners.split_params("ssl://127.0.0.1:1?cert=a&key=b&cert=c") }
    assert_match(/each cert needs its key/, e.message)
  end

  # A TLS listener behind a load balancer that passes connections through
  # with a PROXY header (an AWS NLB, haproxy's send-proxy): the header in
  # plain, then TLS; the client's address from the header.
  def test_a_proxy_header_before_tls
    start("echo.ru", proxy_protocol: "v1")
    tcp = Socket.tcp("127.0.0.1", @port)
    tcp.write("PROXY TCP4 203.0.113.7 127.0.0.1 51234 443\r\n")
    ctx = OpenSSL::SSL::SSLContext.new.tap { |x| x.verify_mode = OpenSSL::SSL::VERIFY_NONE }
    ssl = OpenSSL::SSL::SSLSocket.new(tcp, ctx).tap { |x| x.sync_close = true }
    ssl.connect
    c = TLSClient.new(ssl)
    res = request(c, "/")
    assert_match(/^REMOTE_ADDR: 203\.0\.113\.7$/, res.body)
    assert_match(/^rack\.url_scheme: https$/, res.body)
    # without the header the connection is refused, as on a plain proxy_protocol listener
    plain = TCPSocket.new("127.0.0.1", @port)
    plain.write("\x16\x03\x01\x00\x10" + ("\x00" * 16))
    assert_equal "", HTTPClient.read_to_close(plain, timeout: 5)
  ensure
    c&.close
    plain&.close
  end

  # A hijack over TLS (Action Cable's WebSocket, a raw protocol after an
  # upgrade): the app gets an Oribi::TLSSocket holding the connection's TLS,
  # reads what the client sent (the bytes behind the request first) and
  # writes back; a partial hijack (the rack.hijack response header) too.
  def test_full_and_partial_hijack_over_tls
    skip "nio4r is not installed (bundle group ecosystem)" unless Gem.loaded_specs.key?("nio4r")
    app = File.join(@dir, "config.ru")
    File.write(app, <<~RUBY)
      require "nio"
      run lambda { |env|
        if env["PATH_INFO"] == "/partial"
          return [200, { "rack.hijack" => lambda { |io|
            io.write("partial \#{io.class} \#{io.to_io.class}\n")
            line = io.readpartial(100)
            io.write("echo \#{line}")
            io.close
          } }, []]
        end
        io = env["rack.hijack"].call
        io.write("HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: echo\\r\\nConnection: Upgrade\\r\\n\\r\\n")
        first = io.read_nonblock(100, exception: false) # the bytes sent behind the request
        io.write("ahead \#{first.inspect}\n")
        unless io.wait_readable(0) # as Action Cable's event loop waits: nio4r, on to_io
          selector = NIO::Selector.new
          selector.register(io, :r)
          selector.select(5)
          selector.close
        end
        io.write("echo \#{io.readpartial(100)}")
        io.close
        [-1, {}, []]
      }
    RUBY
    start(app)
    c = client
    c.write("GET /full HTTP/1.1\r\nHost: h\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nearly")
    head = +""
    head << HTTPClient.read_some(c, 1, Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5) until head.end_with?("\r\n\r\n")
    assert_match(/\AHTTP\/1\.1 101 /, head)
    assert_equal "ahead \"early\"\n", HTTPClient.read_line(c, Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5)
    c.write("ping\n")
    assert_equal "echo ping\n", HTTPClient.read_to_close(c)
    c = client
    c.write("GET /partial HTTP/1.1\r\nHost: h\r\n\r\n")
    res = +""
    res << HTTPClient.read_some(c, 100, Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5) until res.include?("partial")
    res << HTTPClient.read_some(c, 100, Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5) until res.end_with?("\n")
    assert_match(/partial Oribi::TLSSocket TCPSocket\n\z/, res)
    c.write("pong\n")
    assert_equal "echo pong\n", HTTPClient.read_to_close(c)
  ensure
    c&.close
  end

  # Session resumption: a client that offers the ticket a worker gave
  # resumes, on any of the workers (the master made the ticket keys before
  # it forked); reuse=false turns it off.
  def test_sessions_resume_on_any_worker
    start("env.ru", workers: 2)
    ctx = OpenSSL::SSL::SSLContext.new.tap { |x| x.verify_mode = OpenSSL::SSL::VERIFY_NONE }
    session = nil
    results = []
    until results.map(&:last).uniq.size == 2 || results.size == 60 # new connections until both workers took some
      ssl = OpenSSL::SSL::SSLSocket.new(Socket.tcp("127.0.0.1", @port), ctx).tap { |x| x.sync_close = true }
      ssl.session = session if session
      ssl.connect
      c = TLSClient.new(ssl)
      pid = request(c, "/").body[/\d+/] # env.ru: "development PID ..."
      session = ssl.session
      results << [ssl.session_reused?, pid]
      c.close
    end
    assert_equal 2, results.map(&:last).uniq.size, "all on one worker: resumption across them not shown"
    assert_equal [false] + [true] * (results.size - 1), results.map(&:first)
    @srv.stop
    start("env.ru", reuse: "false")
    ssl = OpenSSL::SSL::SSLSocket.new(Socket.tcp("127.0.0.1", @port), ctx)
    ssl.session = session
    ssl.connect
    refute ssl.session_reused?
    ssl.close
  end

  # Mutual TLS: force_peer refuses a client without a certificate, or with
  # one the CA did not sign; a client with one finds it in the env, as
  # nginx passes it (SSL_CLIENT_CERT) and as Puma gives it (puma.peercert).
  # peer asks for one and takes a client without.
  def test_client_certificates_under_force_peer_and_peer
    ca = TLSFiles.ca
    ca_path = File.join(@dir, "ca.pem")
    File.write(ca_path, ca[0].to_pem)
    good = TLSFiles.client(ca, cn: "billing-service")
    stranger = TLSFiles.client(TLSFiles.ca(cn: "Another CA"), cn: "intruder")
    app = File.join(@dir, "config.ru")
    File.write(app, <<~RUBY)
      run lambda { |env|
        pem = env["SSL_CLIENT_CERT"]
        [200, {}, ["\#{env['puma.peercert']&.subject} \#{pem ? OpenSSL::X509::Certificate.new(pem).subject : 'none'}"]]
      }
    RUBY
    start(app, ca: ca_path, verify_mode: "force_peer")
    c = TLSClient.open(@port, trust: File.read(@cert), cert: good[0], key: good[1])
    assert_equal "/CN=billing-service/O=Oribi Tests /CN=billing-service/O=Oribi Tests", request(c, "/").body
    c.close
    [[], [stranger[0], stranger[1]]].each do |cert, key|
      refused = begin
        s = TLSClient.open(@port, trust: File.read(@cert), cert: cert, key: key)
        # TLS 1.3: the client's Finished went before the server's verdict
        request(s, "/").nil?
      rescue OpenSSL::SSL::SSLError, Errno::ECONNRESET, EOFError
        true
      end
      assert refused, "force_peer served a client with #{cert ? 'a certificate of another CA' : 'no certificate'}"
    end
    @srv.stop
    start(app, ca: ca_path, verify_mode: "peer")
    assert_equal " none", request(client, "/").body
  end

  # A renewed certificate, written over the old files as certbot does,
  # under load: new handshakes present it within a few seconds, and no
  # request fails, on connections kept alive across the change or opened
  # during it (a kept-alive connection the old worker closed idle is sent
  # to again on a new one, as HTTP clients do: RFC 9112 9.3.1). HUP reads
  # the files again too.
  def test_a_renewed_certificate_is_served_without_a_failed_request
    start("env.ru", workers: 2)
    first = client.peer_cert.serial
    assert_equal first, OpenSSL::X509::Certificate.new(File.read(@cert)).serial
    failures = []
    served = 0
    stop = false
    load = Array.new(2) do |i|
      Thread.new do
        kept = nil
        until stop
          kept = nil if i == 1 # one thread a new connection each time, one kept alive
          reused = !kept.nil?
          begin
            kept ||= TLSClient.open(@port)
            res = request(kept, "/")
          rescue StandardError => e
            res = e
          end
          if !res.is_a?(HTTPClient::Response) && reused # closed while idle: again, on a new one
            kept = nil
            next
          end
          res.is_a?(HTTPClient::Response) && res.status == 200 ? served += 1 : failures << res
          kept = nil unless res.is_a?(HTTPClient::Response)
        end
      end
    end
    sleep 0.3 # let load run before the change (it is the condition under test, not a synchronisation)
    renewed = TLSFiles.self_signed
    File.write(@cert, renewed[0])
    File.write(@key, renewed[1])
    serial = OpenSSL::X509::Certificate.new(renewed[0]).serial
    presented = -> { TLSClient.open(@port).then { |c| c.peer_cert.serial.tap { c.close } } }
    assert wait_until(timeout: 15) { presented.() == serial }, "the renewed certificate is not served:\n#{@srv.log}"
    assert_match(/the certificate files changed: ssl:\/\/127\.0\.0\.1:#{@port} now presents CN=localhost/, @srv.log)
    stop = true
    load.each(&:join)
    assert_empty failures, "#{failures.size} failed of #{served + failures.size}"
    # HUP: read again (the same files here), and said
    @srv.log_until(/rolling restart done/, timeout: 15)
    Process.kill(:HUP, @srv.pid)
    assert_match(/HUP: ssl:\/\/127\.0\.0\.1:#{@port} now presents/, @srv.log_until(/HUP: ssl/))
  ensure
    stop = true
    load&.each(&:join)
  end

  # Files that do not do, written in place: logged, the old certificate
  # stays.
  def test_a_bad_renewal_keeps_the_certificate
    start
    serial = client.peer_cert.serial
    _, other_key = TLSFiles.write(@dir, "other")
    File.write(@key, File.read(other_key))
    assert_match(/the certificate files changed, but the TLS listeners keep their certificates: .*does not match/,
                 @srv.log_until(/keep their certificates/, timeout: 10))
    assert_equal serial, client.peer_cert.serial
  end

  # Puma's ssl_bind, PEM text given as a Puma config reads it from a
  # secret: served, and the key is in no log line, no command line.
  def test_puma_s_ssl_bind_with_pem_text
    cert_pem, key_pem = File.read(@cert), File.read(@key)
    @port = free_port
    conf = File.join(@dir, "puma.rb")
    sock = File.join(@dir, "s.sock")
    File.write(conf, <<~RUBY)
      ssl_bind "127.0.0.1", #{@port}, { cert_pem: ENV.fetch("CERT"), key_pem: ENV.fetch("KEY"), verify_mode: "none",
                                        no_tlsv1: true, low_latency: true }
      bind "unix://#{sock}"
    RUBY
    @srv = ServerProcess.new("echo.ru", "-C", conf, workers: 1, tcp: false, unix: false, sock: sock,
                                                    env: { "CERT" => cert_pem, "KEY" => key_pem })
    assert_match(%r{listening on ssl://127\.0\.0\.1:#{@port}\?verify_mode=none&no_tlsv1=true \(TLS: CN=localhost}, @srv.log_until(/TLS:/))
    assert_match(/ssl_bind.*low_latency.*a TLS setting Oribi does not take/, @srv.log)
    assert_equal 200, request(client, "/").status
    key_line = key_pem.lines[1].strip
    refute_includes @srv.log, key_line
    [@srv.pid, *@srv.worker_pids].each { |pid| refute_includes File.read("/proc/#{pid}/cmdline"), key_line }
  end

  # The output of a start (check: of --check-config) with uri bound.
  def boot_error(uri, check:)
    uri = uri.call(free_port)
    conf = File.join(@dir, "oribi.rb")
    File.write(conf, "bind #{uri.inspect}\n")
    args = check ? ["--check-config", conf] : ["-b", uri, File.join(APPS, "echo.ru")]
    out = IO.popen([RbConfig.ruby, File.join(ROOT, "exe/oribi"), *args, { err: %i[child out] }], &:read)
    [Process.last_status, out]
  end

  # Files that do not do stop the boot (and --check-config) with the
  # reason and the file, never with a key's bytes.
  def test_a_bad_certificate_or_key_stops_the_boot_with_the_reason
    _, other_key = TLSFiles.write(@dir, "other")
    expired_cert, expired_key = TLSFiles.write(@dir, "expired", TLSFiles.self_signed(from: Time.now - (40 * 86_400), days: 30))
    cases = {
      "the private key #{other_key} does not match the certificate #{@cert}" => ->(p) { ssl_uri(p, key: other_key) },
      "the certificate #{expired_cert} has expired (not after " => ->(p) { ssl_uri(p, cert: expired_cert, key: expired_key) },
      "cannot read the certificate in #{@dir}/missing.crt" => ->(p) { ssl_uri(p, cert: "#{@dir}/missing.crt") },
      "verify_mode peer needs ca" => ->(p) { ssl_uri(p, verify_mode: "peer") },
    }
    key_bytes = File.read(@key).lines[1].strip
    cases.each do |want, uri|
      [false, true].each do |check|
        status, out = boot_error(uri, check: check)
        refute status.success?, "check #{check} #{want}: started\n#{out}"
        assert_includes out, want, "check-config: #{check}"
        refute_includes out, key_bytes
      end
    end
  end
end
