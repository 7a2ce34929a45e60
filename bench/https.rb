# frozen_string_literal: true

# TLS served by the server itself, against nginx and Puma 8 in one run:
# bench/apps/hello.ru on 2 workers each (Oribi's defaults, Puma 2 x 1
# thread with ssl_bind, nginx `return 200` with 2 worker processes), the
# same ECDSA P-256 certificate, TLS 1.2 and 1.3, session tickets on.
#
#   bundle exec ruby bench/https.rb [--duration 5] [--rounds 2] [--servers oribi,nginx,puma]
#
# Per server and round: kept alive (wrk, then `oribi bench`), a new
# connection per request with a full handshake each, and with the session
# resumed (`oribi bench --tls-resume`, which counts the handshakes that
# resumed). Rounds alternate the servers so that drift hits all alike; the
# table has each cell's best, and the ratios to nginx and Puma.
require "json"
require "open3"
require "optparse"
require "rbconfig"
require "socket"
require "tmpdir"
require "fileutils"
require_relative "../test/support/wait"
require_relative "../oribi-bench/lib/oribi/process_group"

module HttpsBench
  ROOT = File.expand_path("..", __dir__)
  APP = File.join(ROOT, "bench/apps/hello.ru")
  ORIBI = [RbConfig.ruby, File.join(ROOT, "exe/oribi")].freeze
  CELLS = { "kept alive (wrk)" => :wrk, "kept alive" => :keep, "new, full handshake" => :full,
            "new, resumed" => :resume }.freeze

  module_function

  def free_port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }

  def certificate(dir)
    cert, key = File.join(dir, "cert.pem"), File.join(dir, "key.pem")
    _, err, st = Open3.capture3("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                "-nodes", "-days", "2", "-subj", "/CN=localhost",
                                "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key, "-out", cert)
    abort "openssl req: #{err}" unless st.success?
    [cert, key]
  end

  def nginx_conf(dir, port, cert, key)
    user = Process.uid.zero? ? "user root;" : ""
    temp = %w[client_body proxy fastcgi uwsgi scgi].map { |t| "#{t}_temp_path #{dir}/#{t};" }.join(" ")
    <<~CONF
      #{user}
      worker_processes 2;
      error_log #{dir}/error.log;
      pid #{dir}/nginx.pid;
      events { worker_connections 4096; }
      http {
        #{temp}
        access_log off;
        default_type text/plain;
        keepalive_requests 1000000;
        server {
          listen 127.0.0.1:#{port} ssl backlog=1024;
          ssl_certificate #{cert};
          ssl_certificate_key #{key};
          ssl_protocols TLSv1.2 TLSv1.3;
          location / { return 200 "Hello, World!"; }
        }
      }
    CONF
  end

  def command(server, dir, port, cert, key)
    case server
    when "oribi" then [*ORIBI, "-w", "2", "-b", "ssl://127.0.0.1:#{port}?cert=#{cert}&key=#{key}", APP]
    when "puma"
      conf = File.join(dir, "puma.rb")
      File.write(conf, <<~RUBY)
        workers 2
        threads 1, 1
        ssl_bind "127.0.0.1", #{port}, { cert: #{cert.inspect}, key: #{key.inspect}, verify_mode: "none" }
        rackup #{APP.inspect}
      RUBY
      [RbConfig.ruby, "-S", "puma", "-C", conf]
    when "nginx"
      conf = File.join(dir, "nginx.conf")
      File.write(conf, nginx_conf(dir, port, cert, key))
      ["nginx", "-p", dir, "-c", conf, "-g", "daemon off;"]
    else abort "unknown server #{server}"
    end
  end

  def wrk(port, o)
    out, = Open3.capture2e("wrk", "-t2", "-c50", "-d#{o[:duration]}s", "https://127.0.0.1:#{port}/")
    out[%r{Requests/sec:\s+([\d.]+)}, 1].to_f.tap { |r| warn out if r.zero? }
  end

  def bench(port, o, *flags)
    out, err, = Open3.capture3(*ORIBI, "bench", "-c", "50", "-T", "2", "-d", "#{o[:duration]}s", "--insecure", "--json",
                               *flags, "https://127.0.0.1:#{port}/")
    j = JSON.parse(out)
    warn "#{flags.join(' ')}: #{j['errors']}" unless j["errors"].empty?
    [j["rate"], j["tls_resumed"]&.fdiv(j["tls_handshakes"])]
  rescue JSON::ParserError
    warn err
    [0.0, nil]
  end

  def measure(server, o)
    dir = Dir.mktmpdir("oribi-https")
    cert, key = certificate(dir)
    port = free_port
    group = Oribi::ProcessGroup.new(command(server, dir, port, cert, key), log: File.join(dir, "log"))
    ready = wait_until(timeout: 60) { system("curl", "-skf", "-o", File::NULL, "https://127.0.0.1:#{port}/") }
    abort "#{server} did not answer:\n#{File.read(File.join(dir, 'log'))}" unless ready
    bench(port, o.merge(duration: 1)) # warm-up
    full, = bench(port, o, "--no-keepalive")
    resume, share = bench(port, o, "--no-keepalive", "--tls-resume")
    { wrk: wrk(port, o), keep: bench(port, o).first, full: full, resume: resume, resumed_share: share }
  ensure
    group&.stop
    FileUtils.rm_rf(dir) if dir
  end

  def run(o)
    best = Hash.new { |h, k| h[k] = Hash.new(0.0) }
    shares = {}
    o[:rounds].times do |round|
      o[:servers].each do |server|
        m = measure(server, o)
        shares[server] = m[:resumed_share]
        CELLS.each_value { |k| best[server][k] = [best[server][k], m[k]].max }
        puts format("round %d %-6s %s, resumed %.0f%%", round + 1, server,
                    CELLS.map { |name, k| "#{name} #{m[k].round}" }.join(", "), 100 * (m[:resumed_share] || 0))
      end
    end
    table(best, shares, o[:servers])
  end

  def table(best, shares, servers)
    puts
    puts format("%-22s%s", "req/s (best)", servers.map { |s| s.rjust(10) }.join)
    CELLS.each do |name, k|
      puts format("%-22s%s", name, servers.map { |s| best[s][k].round.to_s.rjust(10) }.join)
    end
    puts format("%-22s%s", "handshakes resumed", servers.map { |s| format("%.0f%%", 100 * (shares[s] || 0)).rjust(10) }.join)
    %w[nginx puma].each do |peer|
      next unless servers.include?(peer) && servers.include?("oribi")

      puts format("oribi / %-14s%s", peer, CELLS.map { |name, k| "#{name} #{(best['oribi'][k] / best[peer][k]).round(2)}x" }.join(", "))
    end
  end
end

if $PROGRAM_NAME == __FILE__
  o = { duration: 5, rounds: 2, servers: %w[oribi nginx puma] }
  OptionParser.new do |p|
    p.on("--duration SEC", Integer) { |v| o[:duration] = v }
    p.on("--rounds N", Integer) { |v| o[:rounds] = v }
    p.on("--servers LIST", Array) { |v| o[:servers] = v }
  end.parse!
  HttpsBench.run(o)
end
