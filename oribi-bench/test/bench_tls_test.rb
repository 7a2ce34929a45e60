# frozen_string_literal: true

require_relative "support/bench_cli"
require_relative "support/tls_nginx"

# https:// against a real nginx with a self-signed certificate made by the
# test: responses over TLS kept alive and not, the certificate checked
# (refused by default, accepted with the CA in $SSL_CERT_FILE, by name or
# by IP, refused for another name), SNI sent, --insecure, and a clear
# refusal when the build has no TLS.
class BenchTLSTest < Minitest::Test
  def setup
    skip "TLS unavailable in this build (no libssl-dev)" unless Oribi::Loadgen::TLS
    skip "nginx or openssl not installed" unless TlsNginx.available?
    @nginx = TlsNginx.new
  end

  def teardown
    @nginx&.stop
  end

  include BenchCLIHelper

  # The JSON report, with env set around the run (OpenSSL reads
  # $SSL_CERT_FILE as the run sets TLS up).
  def bench_json(*argv, env: {})
    saved = env.to_h { |k, _| [k, ENV.fetch(k, nil)] }
    env.each { |k, v| ENV[k] = v }
    rc, out, err = bench(*argv, "--format", "json")
    [rc, out.empty? ? nil : JSON.parse(out), err]
  ensure
    saved&.each { |k, v| ENV[k] = v }
  end

  def https(host = "localhost") = "https://#{host}:#{@nginx.port}/"

  # Bytes are HTTP's, not TLS records': the same as over the plain port.
  def test_requests_over_tls_kept_alive_and_not
    [[], ["--no-keepalive"]].each do |mode|
      rc, j, = bench_json("-n", "40", "-c", "2", "-T", "1", "-H", "Host: t", "--insecure", *mode, https)
      assert_equal 0, rc, mode.inspect
      assert_equal({ "200" => 40 }, j["status_codes"], mode.inspect)
      _, plain, = bench_json("-n", "40", "-c", "2", "-T", "1", "-H", "Host: t", *mode, "http://localhost:#{@nginx.plain_port}/")
      assert_equal plain["bytes_in"], j["bytes_in"], mode.inspect
      assert_equal plain["bytes_out"], j["bytes_out"], mode.inspect
    end
  end

  # --tls-resume: new connections offer the last session nginx gave (its
  # tickets) and resume it; the report counts the handshakes that did.
  # Without it each is full, and the report says nothing of resumption.
  def test_new_connections_resume_the_session_with_tls_resume
    rc, j, = bench_json("-n", "60", "-c", "2", "-T", "2", "--no-keepalive", "--insecure", "--tls-resume", https)
    assert_equal 0, rc
    assert_equal 60, j["status_codes"]["200"]
    assert_equal 60, j["tls_handshakes"]
    assert_operator j["tls_resumed"], :>=, 55, "the first of each connection slot is full; the rest resume"
    _, j, = bench_json("-n", "20", "-c", "1", "--no-keepalive", "--insecure", https)
    refute j.key?("tls_resumed")
  end

  def test_the_certificate_is_checked_unless_insecure
    rc, j, = bench_json("-n", "3", "-c", "1", "-T", "1", https)
    assert_equal 1, rc
    assert_equal 3, j["error_counts"]["tls"]
    assert_equal ["tls: 3 (certificate verify failed: self-signed certificate)"], j["errors"]
    # The test's certificate as the CA: its names and its IP pass.
    %w[localhost 127.0.0.1].each do |host|
      rc, j, = bench_json("-n", "3", "-c", "1", "-T", "1", https(host), env: { "SSL_CERT_FILE" => @nginx.cert })
      assert_equal 0, rc, host
      assert_equal({ "200" => 3 }, j["status_codes"], host)
    end
    rc, j, = bench_json("-n", "2", "-c", "1", "-T", "1", "--sni", "other.test", https, env: { "SSL_CERT_FILE" => @nginx.cert })
    assert_equal 1, rc
    assert_match(/\Atls: 2 \(certificate verify failed: hostname mismatch\)\z/, j["errors"].first)
  end

  def test_sni_is_the_urls_host_or_sni
    _, j, = bench_json("-n", "3", "-c", "1", "-T", "1", "--insecure", "--sni", "a.test", https("127.0.0.1"))
    assert_equal({ "201" => 3 }, j["status_codes"], "nginx saw a.test")
    _, j, = bench_json("-n", "3", "-c", "1", "-T", "1", "--insecure", https)
    assert_equal({ "200" => 3 }, j["status_codes"], "nginx saw localhost")
  end

  # A server closing kept-alive TLS connections every 5 requests, and an
  # open loop leaving connections idle between sends (where TLS 1.3
  # session tickets arrive): nothing lost either way.
  def test_closed_and_idle_tls_connections_are_handled
    @nginx.stop
    @nginx = TlsNginx.new(keepalive_requests: 5)
    rc, j, = bench_json("-n", "60", "-c", "3", "-T", "1", "--insecure", https)
    assert_equal 0, rc
    assert_equal({ "200" => 60 }, j["status_codes"])
    rc, j, = bench_json("-r", "100", "-d", "1s", "-T", "1", "--insecure", https)
    assert_equal 0, rc
    assert_equal 0, j["error_counts"].values.sum, j["errors"].inspect
    assert_equal j["scheduled"], j["requests"] + j["dropped"]
  end

  def test_without_tls_in_the_build_https_is_refused_clearly
    Oribi::Loadgen.send(:remove_const, :TLS)
    Oribi::Loadgen.const_set(:TLS, false)
    rc, j, err = bench_json("-n", "1", https)
    assert_equal 2, rc
    assert_nil j
    assert_match(/\Aoribi bench: https needs TLS, and this oribi bench was built without OpenSSL: install libssl-dev/, err)
  ensure
    Oribi::Loadgen.send(:remove_const, :TLS)
    Oribi::Loadgen.const_set(:TLS, true)
  end
end
