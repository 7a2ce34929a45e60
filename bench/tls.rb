# frozen_string_literal: true

# `oribi bench` over https next to plain http, in one run, against one nginx
# (`return 200`, a self-signed RSA 2048 certificate made by `openssl req`)
# serving both on loopback ports:
#
#   ruby bench/tls.rb [-T 1] [-c 8] [-d 3] [--rounds 3]
#
# Each round runs keep-alive and a connection per request (a full TLS
# handshake each: no session resumption), plain then TLS, alternating so
# drift hits both alike. Prints requests/s per round, the best of each and
# TLS as a share of plain. Numbers in oribi-bench/docs/BENCH.md.
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../oribi-bench/lib", __dir__))
require "optparse"
require "stringio"
require "json"
require "oribi/bench"
require_relative "../oribi-bench/test/support/tls_nginx"

opts = { threads: 1, connections: 8, duration: 3, rounds: 3 }
OptionParser.new do |o|
  o.on("-T N", Integer) { |v| opts[:threads] = v }
  o.on("-c N", Integer) { |v| opts[:connections] = v }
  o.on("-d SECONDS", Integer) { |v| opts[:duration] = v }
  o.on("--rounds N", Integer) { |v| opts[:rounds] = v }
end.parse!
abort "TLS unavailable: build with libssl-dev" unless Oribi::Loadgen::TLS
abort "nginx and openssl needed in PATH" unless TlsNginx.available?

def rate(argv)
  out = StringIO.new
  Oribi::Bench::CLI.run(argv + ["--format", "json"], out: out, err: $stderr)
  j = JSON.parse(out.string)
  warn "errors: #{j['errors']}" unless j["errors"].empty?
  j["rate"]
end

nginx = TlsNginx.new
begin
  base = ["-T", opts[:threads].to_s, "-c", opts[:connections].to_s, "-d", "#{opts[:duration]}s"]
  urls = { plain: "http://localhost:#{nginx.plain_port}/", tls: "https://localhost:#{nginx.port}/" }
  best = Hash.new(0.0)
  opts[:rounds].times do |round|
    row = { "keep-alive" => [], "close" => ["--no-keepalive"] }.flat_map do |mode, flags|
      %i[plain tls].map do |kind|
        r = rate(base + flags + (kind == :tls ? ["--insecure"] : []) + [urls[kind]])
        best[[mode, kind]] = [best[[mode, kind]], r].max
        format("%s %s %.0f", mode, kind, r)
      end
    end
    puts "round #{round + 1}: #{row.join(', ')}"
  end
  %w[keep-alive close].each do |mode|
    puts format("%-10s best plain %.0f req/s, tls %.0f req/s: tls / plain %.2f", mode, best[[mode, :plain]],
                best[[mode, :tls]], best[[mode, :tls]] / best[[mode, :plain]])
  end
ensure
  nginx.stop
end
