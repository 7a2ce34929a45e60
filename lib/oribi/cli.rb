# frozen_string_literal: true

require "optparse"
require "socket"

module Oribi
  # `oribi [options] [RACKUP_FILE]`: turns the command line into a Config
  # and runs the server. Options are described in docs/CONFIGURATION.md.
  class CLI
    def self.run(argv) = new.run(argv)

    def run(argv)
      config = parse(argv)
      Server.new(config).run
    rescue OptionParser::ParseError, Config::Error, ArgumentError, SystemCallError, SocketError => e
      $stderr.puts "oribi: #{e.message}"
      2
    end

    def parse(argv)
      values = {}
      binds = []
      parser = OptionParser.new do |o|
        o.banner = "Usage: oribi [options] [RACKUP_FILE (default config.ru)]"
        o.separator ""
        o.on("-b", "--bind URI", "tcp://HOST:PORT or unix:///PATH; repeatable (default tcp://0.0.0.0:$PORT or 9292)") { |v| binds << v }
        o.on("-w", "--workers N", Integer, "worker processes; 0 or 1 serve in one process (default: CPU count or $WEB_CONCURRENCY)") { |v| values[:workers] = v }
        o.on("-E", "--env ENV", "RACK_ENV for the app (default $RACK_ENV or development)") { |v| values[:environment] = v }
        o.on("--[no-]keepalive", "keep HTTP/1.1 connections open between requests (default on)") { |v| values[:keepalive] = v }
        o.on("--keepalive-timeout SEC", Float, "close idle keep-alive connections after SEC (default 20)") { |v| values[:keepalive_timeout] = v }
        o.on("--keepalive-requests N", Integer, "requests per connection before close; 0 = no limit (default 1000)") { |v| values[:keepalive_requests] = v }
        o.on("--header-timeout SEC", Float, "408 when a request head takes longer (default 30)") { |v| values[:header_timeout] = v }
        o.on("--body-timeout SEC", Float, "408 when a body gains less than 8 KiB in SEC (default 30)") { |v| values[:body_timeout] = v }
        o.on("--write-timeout SEC", Float, "drop a client that reads nothing for SEC (default 30)") { |v| values[:write_timeout] = v }
        o.on("--max-body BYTES", Integer, "413 for larger request bodies; 0 = no limit (default 0)") { |v| values[:max_body] = v }
        o.on("--body-buffer BYTES", Integer, "bodies larger than this go to a tmpfile (default 114688)") { |v| values[:body_buffer] = v }
        o.on("--max-request-line BYTES", Integer, "414 for longer request lines (default 8192)") { |v| values[:max_request_line] = v }
        o.on("--max-header-bytes BYTES", Integer, "431 for a larger header section (default 65536)") { |v| values[:max_header_bytes] = v }
        o.on("--max-headers N", Integer, "431 for more header fields (default 100)") { |v| values[:max_headers] = v }
        o.on("--max-connections N", Integer, "open connections per worker (default 1024)") { |v| values[:max_connections] = v }
        o.on("--backlog N", Integer, "listen(2) backlog (default 1024)") { |v| values[:backlog] = v }
        o.on("--shutdown-timeout SEC", Float, "kill workers still busy this long after TERM (default 25)") { |v| values[:shutdown_timeout] = v }
        o.on("-v", "--version", "print the version") do
          puts "oribi #{VERSION}"
          exit 0
        end
        o.on("-h", "--help", "this help") do
          puts o
          exit 0
        end
      end
      rest = parser.parse(argv)
      raise OptionParser::NeedlessArgument, rest[1..].join(" ") if rest.size > 1

      values[:rackup] = rest.first if rest.first
      values[:binds] = binds unless binds.empty?
      Config.new(values)
    end
  end
end
