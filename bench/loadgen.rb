# frozen_string_literal: true

# A thin command line over Oribi::Loadgen, the seed of `oribi bench`:
#
#   ruby bench/loadgen.rb [-t 2] [-c 10] [-d 10 | -n 1000] [--close] URL
#
# URL is http://host:port/path, or unix:/path/to.sock[:/http/path]. Prints a
# vegeta-style report (latencies in milliseconds); --json prints the raw Hash.
$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "oribi/oribi_bench"
require "optparse"
require "uri"
require "json"

module Bench
  module LoadgenCLI
    module_function

    # The raw request for a target, built here so the C side stays byte-blind.
    def request_for(path, host, keepalive:, method: "GET")
      head = +"#{method} #{path} HTTP/1.1\r\nHost: #{host}\r\nUser-Agent: oribi-bench\r\n"
      head << "Connection: close\r\n" unless keepalive
      head << "\r\n"
    end

    # Returns the Oribi::Loadgen.run options for a URL string.
    def target(url, keepalive:)
      if url.start_with?("unix:")
        sock, path = url.delete_prefix("unix:").split(":", 2)
        { unix_path: sock, request: request_for(path || "/", "localhost", keepalive: keepalive) }
      else
        uri = URI(url)
        raise ArgumentError, "only http:// URLs or unix:PATH" unless uri.scheme == "http"
        host = uri.host.delete_prefix("[").delete_suffix("]")
        authority = uri.port == 80 ? uri.host : "#{uri.host}:#{uri.port}"
        { host: host, port: uri.port,
          request: request_for(uri.request_uri, authority, keepalive: keepalive) }
      end
    end

    def ms(us)
      us.nil? ? "-" : format("%.3fms", us / 1000.0)
    end

    def report(r, io = $stdout)
      lat = r[:latency]
      errors = r[:errors].values.sum
      total = r[:requests] + errors
      ok = r[:status].sum { |code, n| code >= 200 && code < 400 ? n : 0 }
      el = r[:elapsed]
      io.puts format("Requests      [total, rate, throughput]  %d, %.2f, %.2f",
                     total, el.positive? ? total / el : 0, el.positive? ? ok / el : 0)
      io.puts format("Duration      [total]                    %.3fs", el)
      io.puts "Latencies     [min, mean, 50, 90, 95, 99, 99.9, max]  " +
              %i[min mean p50 p90 p95 p99 p999 max].map { |k| ms(lat[k]) }.join(", ")
      io.puts format("Bytes In      [total, mean]              %d, %.2f",
                     r[:bytes_in], total.positive? ? r[:bytes_in].fdiv(total) : 0)
      io.puts format("Bytes Out     [total, mean]              %d, %.2f",
                     r[:bytes_out], total.positive? ? r[:bytes_out].fdiv(total) : 0)
      io.puts format("Success       [ratio]                    %.2f%%",
                     total.positive? ? 100.0 * ok / total : 0)
      io.puts "Status Codes  [code:count]               " +
              r[:status].sort.map { |c, n| "#{c}:#{n}" }.join("  ")
      io.puts "Errors        " + r[:errors].map { |k, n| "#{k}:#{n}" }.join("  ")
    end

    def main(argv)
      opts = { threads: 2, connections: 10, keepalive: true }
      json = false
      OptionParser.new do |o|
        o.banner = "usage: ruby bench/loadgen.rb [options] URL"
        o.on("-t", "--threads N", Integer) { |v| opts[:threads] = v }
        o.on("-c", "--connections N", Integer) { |v| opts[:connections] = v }
        o.on("-d", "--duration SECONDS", Float) { |v| opts[:duration] = v }
        o.on("-n", "--requests N", Integer) { |v| opts[:requests] = v }
        o.on("--timeout SECONDS", Float) { |v| opts[:timeout] = v }
        o.on("--close", "new connection per request (connect time in latency)") do
          opts[:keepalive] = false
        end
        o.on("--json") { json = true }
      end.parse!(argv)
      abort "usage: ruby bench/loadgen.rb [options] URL" unless argv.size == 1
      result = Oribi::Loadgen.run(opts.merge(target(argv[0], keepalive: opts[:keepalive])))
      json ? puts(JSON.generate(result)) : report(result)
    end
  end
end

Bench::LoadgenCLI.main(ARGV) if $PROGRAM_NAME == __FILE__
