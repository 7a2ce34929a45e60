# frozen_string_literal: true

require "test_helper"
require "json"

# What the server writes about itself: the banner, the access log in each
# format, process titles.
class LoggingTest < Minitest::Test
  def test_banner_names_version_listeners_workers_and_pid
    srv = ServerProcess.new("env.ru", workers: 2)
    log = srv.log_until(/listening on unix/)
    assert_match(/Oribi #{Regexp.escape(Oribi::VERSION)} .*pid #{srv.pid}, 2 workers/, log)
    assert_match(%r{listening on tcp://127\.0\.0\.1:#{srv.port}}, log)
    assert_match(%r{listening on unix://}, log)
  ensure
    srv&.stop
  end

  # Every 5xx the server answers by itself says why in the error log.
  def test_5xx_the_loop_answers_itself_are_logged_with_their_cause
    srv = ServerProcess.new("env.ru")
    s = srv.tcp
    s.write("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n")
    assert_equal 501, HTTPClient.read_response(s).status
    s = srv.tcp
    s.write("GET / HTTP/2.0\r\nHost: t\r\n\r\n")
    assert_equal 505, HTTPClient.read_response(s).status
    log = srv.log_until(/answered 505/)
    assert_match(/answered 501 to 127\.0\.0\.1: a transfer coding other than chunked/, log)
    assert_match(/answered 505 to 127\.0\.0\.1: an HTTP major version other than 1/, log)
  ensure
    srv&.stop
  end

  def test_access_log_is_off_by_default
    srv = ServerProcess.new("env.ru")
    HTTPClient.request(srv.tcp, "/quiet")
    srv.stop
    refute_match(%r{/quiet}, srv.log)
  end

  def access_line(format)
    Dir.mktmpdir do |d|
      path = File.join(d, "access.log")
      srv = ServerProcess.new("env.ru", "--access-log", path, "--access-log-format", format)
      HTTPClient.request(srv.tcp, "/logged?q=1", headers: { "User-Agent" => "tester\"x", "Referer" => "http://r/" })
      assert wait_until { File.exist?(path) && File.size(path).positive? }
      srv.stop
      File.read(path).lines.last
    end
  end

  # Behind a proxy the peer is the proxy: the log names the client the
  # trusted proxies say sent the request (the nearest untrusted address of
  # X-Forwarded-For); REMOTE_ADDR stays the peer.
  def test_client_address_from_x_forwarded_for_behind_trusted_proxies
    Dir.mktmpdir do |d|
      path = File.join(d, "access.log")
      srv = ServerProcess.new("echo.ru", "--access-log", path, "--trusted-proxies", "127.0.0.0/8,10.0.0.0/8")
      res = HTTPClient.request(srv.tcp, "/a", headers: { "X-Forwarded-For" => "198.51.100.9, 203.0.113.7, 10.0.0.1" })
      assert_match(/^REMOTE_ADDR: 127\.0\.0\.1$/, res.body)
      HTTPClient.request(srv.tcp, "/b") # no header: the peer
      assert wait_until { File.exist?(path) && File.read(path).lines.size >= 2 }
      first, second = File.read(path).lines
      assert_match(%r{\A203\.0\.113\.7 - - .*"GET /a }, first)
      assert_match(%r{\A127\.0\.0\.1 - - .*"GET /b }, second)
    ensure
      srv&.stop
    end
  end

  # X-Forwarded-For is the client's to write: only a syntactically valid
  # address is taken from it (else the log names the nearest trusted hop),
  # and every field is escaped alike. A tab in it used to forge LTSV fields.
  def test_forwarded_garbage_never_forges_a_field
    Dir.mktmpdir do |d|
      path = File.join(d, "access.log")
      srv = ServerProcess.new("echo.ru", "--access-log", path, "--access-log-format", "ltsv",
                              "--trusted-proxies", "127.0.0.0/8,10.0.0.0/8")
      ["203.0.113.7\tstatus:999\treqtime:0", "evil.example, 10.0.0.1", "198.51.100.1, 203.0.113.7 x, 10.0.0.2",
       "2001:db8::1\tua:forged"].each do |xff|
        assert_equal 200, HTTPClient.request(srv.tcp, "/x", headers: { "X-Forwarded-For" => xff }).status
      end
      assert wait_until { File.exist?(path) && File.read(path).lines.size >= 4 }
      lines = File.read(path).lines
      hosts = lines.map do |l|
        fields = l.chomp.split("\t")
        assert_equal %w[host time method uri protocol status size referer ua reqtime], fields.map { |f| f[/\A[^:]+/] }, l
        fields.first.delete_prefix("host:")
      end
      assert_equal %w[127.0.0.1 10.0.0.1 10.0.0.2 127.0.0.1], hosts
    ensure
      srv&.stop
    end
  end

  # Each hop cost an address parse in Ruby: a 60 KB header of 6,001 hops
  # from a trusted peer took 35-77 ms a request. The walk stops after
  # MAX_HOPS from the right; what lies left of them is never read.
  def test_forwarded_hops_examined_are_bounded
    Dir.mktmpdir do |d|
      path = File.join(d, "access.log")
      srv = ServerProcess.new("echo.ru", "--access-log", path, "--trusted-proxies", "127.0.0.0/8,10.0.0.0/8",
                              "--max-header-bytes", "100000")
      xff = (["198.51.100.1"] + Array.new(6000) { |i| "10.0.#{i / 250}.#{(i % 250) + 1}" }).join(", ")
      assert_operator xff.bytesize, :>, 60_000
      assert_equal 200, HTTPClient.request(srv.tcp, "/x", headers: { "X-Forwarded-For" => xff }).status
      assert wait_until { File.exist?(path) && File.size(path).positive? }
      assert_equal "10.0.23.235", File.read(path)[/\A\S+/] # the 16th hop from the right
    ensure
      srv&.stop
    end
    log = Oribi::AccessLog.new(File::NULL, "combined", %w[127.0.0.0/8 10.0.0.0/8])
    parsed = 0
    log.define_singleton_method(:address) { |text| parsed += 1; IPAddr.new(text) }
    log.send(:client, { "REMOTE_ADDR" => "127.0.0.1", "HTTP_X_FORWARDED_FOR" => Array.new(6001, "10.0.0.1").join(",") })
    assert_equal 1 + Oribi::AccessLog::MAX_HOPS, parsed # the peer, then the hops
  end

  # Rack::MethodOverride (in every Rails app) turns a form's POST with
  # _method=DELETE into a DELETE for the app; the access log says what the
  # client sent.
  def test_access_log_shows_the_method_sent_not_the_override
    Dir.mktmpdir do |d|
      path = File.join(d, "access.log")
      app = File.join(d, "app.ru")
      File.write(app, "use Rack::MethodOverride\nrun ->(env) { [200, {}, [env['REQUEST_METHOD']]] }\n")
      srv = ServerProcess.new(app, "--access-log", path)
      res = HTTPClient.request(srv.tcp, "/items/1", method: "POST", body: "_method=DELETE",
                                                    headers: { "Content-Type" => "application/x-www-form-urlencoded" })
      assert_equal "DELETE", res.body
      assert wait_until { File.exist?(path) && File.size(path).positive? }
      assert_match(%r{"POST /items/1 HTTP/1\.1" 200 }, File.read(path))
    ensure
      srv&.stop
    end
  end

  def test_combined_format
    line = access_line("combined")
    assert_match(%r{\A127\.0\.0\.1 - - \[\d{2}/\w{3}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}\] "GET /logged\?q=1 HTTP/1\.1" 200 \d+ "http://r/" "tester\\x22x"\n\z}, line)
  end

  def test_ltsv_format
    fields = access_line("ltsv").chomp.split("\t").to_h { |f| f.split(":", 2) }
    assert_equal "GET", fields["method"]
    assert_equal "/logged?q=1", fields["uri"]
    assert_equal "200", fields["status"]
    assert_match(/\A\d+\.\d{6}\z/, fields["reqtime"])
  end

  def test_json_format
    entry = JSON.parse(access_line("json"))
    assert_equal "GET", entry["method"]
    assert_equal 200, entry["status"]
    assert_equal "tester\"x", entry["ua"]
    assert_kind_of Float, entry["duration"]
  end

  def test_process_titles
    srv = ServerProcess.new("env.ru", workers: 1)
    assert wait_until { srv.worker_pids.size == 1 }
    worker = srv.worker_pids.first
    assert wait_until { File.read("/proc/#{worker}/cmdline").start_with?("oribi worker[0] served=") }
    assert_match(/\Aoribi master /, File.read("/proc/#{srv.pid}/cmdline"))
  ensure
    srv&.stop
  end

  def test_unix_socket_mode
    Dir.mktmpdir do |d|
      path = File.join(d, "m.sock")
      srv = ServerProcess.new("env.ru", "-b", "unix://#{path}", "--unix-mode", "0600",
                              tcp: false, unix: false, sock: path)
      assert_equal 0o600, File.stat(path).mode & 0o777
    ensure
      srv&.stop
    end
  end
end
