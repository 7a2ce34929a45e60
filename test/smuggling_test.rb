# frozen_string_literal: true

require "test_helper"
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
  NGINX = ENV.fetch("NGINX", "nginx")
  FOLLOW = "GET /follow-up HTTP/1.1\r\nHost: a\r\n\r\n"
  LAST = "GET /last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"

  def self.nginx_available? = system(NGINX, "-v", %i[out err] => File::NULL)

  def setup
    skip "nginx is not installed: the differential smuggling test did not run" unless self.class.nginx_available?

    @oribi = ServerProcess.new("echo.ru", "--max-body", "1048576", tcp: false)
    @dir = Dir.mktmpdir("oribi-nginx")
    @port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
    conf = File.join(@dir, "nginx.conf")
    File.write(conf, nginx_conf)
    @nginx_log = File.join(@dir, "nginx.out")
    @nginx = Process.spawn(NGINX, "-p", @dir, "-c", conf, "-g", "daemon off;",
                           %i[out err] => @nginx_log, pgroup: true)
    ready = wait_until(timeout: 10) do
      TCPSocket.new("127.0.0.1", @port).close || true
    rescue Errno::ECONNREFUSED
      false
    end
    assert ready, "nginx did not start:\n#{File.read(@nginx_log)}#{File.read(File.join(@dir, 'error.log')) rescue ''}" # rubocop:disable Style/RescueModifier
  end

  def teardown
    if @nginx
      begin
        Process.kill(:TERM, @nginx)
        Timeout.timeout(10) { Process.wait(@nginx) }
      rescue Timeout::Error
        Process.kill(:KILL, -@nginx)
        Process.wait(@nginx)
      rescue Errno::ESRCH, Errno::ECHILD
        nil
      end
      begin
        Process.kill(:KILL, -@nginx) # its workers, should any be left
      rescue Errno::ESRCH, Errno::EPERM
        nil
      end
    end
    @oribi&.stop
    FileUtils.rm_rf(@dir) if @dir
  end

  def nginx_conf
    user = Process.uid.zero? ? "user #{Etc.getpwuid(0).name};" : ""
    <<~CONF
      #{user}
      worker_processes 1;
      error_log #{@dir}/error.log info;
      pid #{@dir}/nginx.pid;
      events { worker_connections 512; }
      http {
        log_format up '$request_method $request_uri $status [$upstream_addr] [$upstream_status]';
        access_log #{@dir}/access.log up;
        client_body_temp_path #{@dir}/body;
        proxy_temp_path #{@dir}/proxy;
        fastcgi_temp_path #{@dir}/fastcgi;
        uwsgi_temp_path #{@dir}/uwsgi;
        scgi_temp_path #{@dir}/scgi;
        client_max_body_size 1m;
        upstream oribi { server unix:#{@oribi.sock}; keepalive 8; }
        server {
          listen 127.0.0.1:#{@port};
          location / {
            proxy_pass http://oribi;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_next_upstream off;
          }
        }
      }
    CONF
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
    assert_operator total, :>=, cases.size, "nginx forwarded almost nothing: #{File.read(File.join(@dir, 'error.log'))[-2000..]}"
  end
end
