# frozen_string_literal: true

require "test_helper"
require "nginx_proxy"
require "etc"
require_relative "support/corpus"

# Request smuggling, differential: every corpus case (the smuggle-* ones are
# the classic CL.TE / TE.CL / TE.TE attacks) goes through a real nginx that proxies to
# Oribi over a unix socket with keep-alive upstream connections. Each case
# is followed on the same client connection by a valid GET and a last GET
# with Connection: close. For each case, the requests nginx forwarded and
# Oribi answered 200 (nginx's access log: method, URI, upstream status) must
# be exactly, in order, the requests Oribi's app saw (its "served" log
# lines), so no request hidden in a body reaches the app; and nginx must
# get an answer from Oribi for every request it forwarded (no 502: Oribi
# never lost track of a request). A request nginx
# forwards and Oribi refuses (Oribi is stricter about control bytes in
# values and fragments) is one request on both sides: it shows as a 400
# from upstream, not as a difference in boundaries.
#
# Skips (with a message) when nginx is not installed.
class SmugglingTest < Minitest::Test
  FOLLOW = "GET /follow-up HTTP/1.1\r\nHost: a\r\n\r\n"
  LAST = "GET /last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"

  def setup
    skip "nginx is not installed: the differential smuggling test did not run" unless NginxProxy.available?

    @oribi = ServerProcess.new("echo.ru", "--max-body", "1048576", tcp: false)
    @proxy = NginxProxy.new(@oribi.sock, keepalive: 8, location: "proxy_next_upstream off;", http: <<~HTTP)
      log_format up '$request_method $request_uri $status [$upstream_addr] [$upstream_status]';
      access_log access.log up;
      client_max_body_size 1m;
    HTTP
    @dir = @proxy.dir
    @port = @proxy.port
  end

  def teardown
    @proxy&.stop
    @oribi&.stop
  end

  def access_log_lines
    File.read(File.join(@dir, "access.log")).lines
  rescue Errno::ENOENT
    []
  end

  # [method path, upstream status] of each request nginx forwarded, from
  # access log lines; one entry per upstream attempt.
  def forwarded(lines)
    lines.flat_map do |l|
      m = /\A(\S+) (\S+) \d+ \[([^\]]*)\] \[([^\]]*)\]/.match(l) or next []
      next [] if m[3] == "-"

      # nginx writes bytes past ASCII as \xHH
      path = m[2].gsub(/\\x(\h\h)/) { Regexp.last_match(1).hex.chr }.force_encoding(Encoding::UTF_8)
      path = path.sub(/\?.*/, "").sub(%r{\Ahttps?://[^/]*}i, "")
      m[4].split(", ").map { |st| ["#{m[1]} #{path.empty? ? '/' : path}", st] }
    end
  end

  def served_lines = @oribi.log.scan(/^served (.*)$/).flatten

  # Sends the bytes and reads until nginx closes (the LAST request or an
  # error closes the connection).
  def send_through_nginx(bytes)
    sock = TCPSocket.new("127.0.0.1", @port)
    begin
      sock.write(bytes)
    rescue Errno::EPIPE, Errno::ECONNRESET
      nil
    end
    HTTPClient.closed?(sock, timeout: 10)
  ensure
    sock&.close
  end

  # incomplete requests would only wait for nginx's timeouts
  def cases = Corpus::CASES.reject { |k| k.expect == ["timeout"] }.to_h { |k| [k.name, k.request] }

  def test_nginx_and_oribi_agree_on_request_boundaries
    problems = []
    total = 0
    cases.each do |name, request|
      a0 = access_log_lines.size
      s0 = served_lines.size
      send_through_nginx(request + FOLLOW + LAST)
      fwd = served = nil
      wait_until(timeout: 2) do
        fwd = forwarded(access_log_lines.drop(a0))
        served = served_lines.drop(s0)
        served == fwd.select { |_, st| st == "200" }.map(&:first)
      end
      total += fwd.size
      ok = fwd.select { |_, st| st == "200" }.map(&:first)
      problems << "#{name}: nginx forwarded #{ok.inspect} answered 200, the app saw #{served.inspect}" unless served == ok
      lost = fwd.reject { |_, st| st.match?(/\A[1-5]\d\d\z/) && st != "502" && st != "504" }
      problems << "#{name}: nginx got no answer from Oribi for #{lost.inspect}" unless lost.empty?
    end
    assert_empty problems, problems.join("\n")
    assert_operator total, :>=, cases.size, "nginx forwarded almost nothing: #{log_end(@proxy.log)}"
  end
end
