# frozen_string_literal: true

require "optparse"
require "socket"

module Oribi
  # `oribi [options] [RACKUP_FILE]`: turns the command line into a Config
  # (on top of the config file) and runs the server. Options are described
  # once, in docs/CONFIGURATION.md; --help gives the one-line version.
  class CLI
    def self.run(argv) = new.run(argv)

    def run(argv)
      config = Config.load(parse(argv))
      Server.new(config).run
    rescue OptionParser::ParseError, Config::Error, ArgumentError, SystemCallError, SocketError => e
      $stderr.puts "oribi: #{e.message.lines.first.chomp}"
      2
    end

    OCTAL = /\A0?[0-7]{1,3}\z/

    # Returns the options given on the command line as a Hash.
    def parse(argv)
      v = {}
      binds = []
      parser = OptionParser.new do |o|
        o.banner = "Usage: oribi [options] [RACKUP_FILE (default config.ru)]\n" \
                   "       oribi ctl stats|metrics|ready|restart|stop (docs/CONTROL.md)\n" \
                   "       oribi bench URL (docs/BENCH.md)"
        o.separator ""
        o.on("-C", "--config FILE", "config file (default config/oribi.rb if present)") { |x| v[:config_file] = x }
        o.on("-b", "--bind URI", "tcp://HOST:PORT or unix:///PATH; repeatable (default tcp://0.0.0.0:$PORT or 9292)") { |x| binds << x }
        o.on("-w", "--workers N", Integer, "worker processes; 0 = serve from this process (default $WEB_CONCURRENCY or CPUs)") { |x| v[:workers] = x }
        o.on("-t", "--threads N", Integer, "threads per worker (default $ORIBI_THREADS or 1)") { |x| v[:threads] = x }
        o.on("-E", "--env ENV", "RACK_ENV for the app (default $RACK_ENV or development)") { |x| v[:environment] = x }
        o.on("--[no-]preload", "load the app in the master before forking (default on)") { |x| v[:preload_app] = x }
        o.on("--[no-]keepalive", "keep HTTP/1.1 connections open between requests (default on)") { |x| v[:keepalive] = x }
        o.on("--keepalive-timeout SEC", Float, "close idle keep-alive connections after SEC (default 20)") { |x| v[:keepalive_timeout] = x }
        o.on("--keepalive-requests N", Integer, "requests per connection before close; 0 = no limit (default 1000)") { |x| v[:keepalive_requests] = x }
        o.on("--header-timeout SEC", Float, "408 when a request head takes longer (default 30)") { |x| v[:header_timeout] = x }
        o.on("--body-timeout SEC", Float, "408 when a body gains less than 8 KiB in SEC (default 30)") { |x| v[:body_timeout] = x }
        o.on("--write-timeout SEC", Float, "drop a client that reads nothing for SEC (default 30)") { |x| v[:write_timeout] = x }
        o.on("--max-body BYTES", Integer, "413 for larger request bodies; 0 = no limit (default 0)") { |x| v[:max_body] = x }
        o.on("--body-buffer BYTES", Integer, "bodies larger than this go to a tmpfile (default 114688)") { |x| v[:body_buffer] = x }
        o.on("--max-request-line BYTES", Integer, "414 for longer request lines (default 8192)") { |x| v[:max_request_line] = x }
        o.on("--max-header-bytes BYTES", Integer, "431 for a larger header section (default 65536)") { |x| v[:max_header_bytes] = x }
        o.on("--max-headers N", Integer, "431 for more header fields (default 100)") { |x| v[:max_headers] = x }
        o.on("--max-connections N", Integer, "open connections per worker (default 1024)") { |x| v[:max_connections] = x }
        o.on("--max-requests N", Integer, "recycle a worker after N requests; 0 = never (default 0)") { |x| v[:max_requests] = x }
        o.on("--min-requests N", Integer, "with --max-requests: draw each worker's limit from N..max (default 0)") { |x| v[:min_requests] = x }
        o.on("--backlog N", Integer, "listen(2) backlog (default 1024)") { |x| v[:backlog] = x }
        o.on("--[no-]reuse-port", "SO_REUSEPORT on TCP listeners (default off)") { |x| v[:reuse_port] = x }
        o.on("--unix-mode MODE", OCTAL, "permissions of unix sockets, octal (default 0660)") { |x| v[:unix_mode] = x.to_i(8) }
        o.on("--umask MODE", OCTAL, "process umask, octal (default: inherited)") { |x| v[:umask] = x.to_i(8) }
        o.on("--worker-timeout SEC", Float, "kill a worker busy in one request longer; 0 = never (default 60)") { |x| v[:worker_timeout] = x }
        o.on("--soft-timeout SEC", Float, "log a request running longer, with its backtrace; 0 = off (default 0)") { |x| v[:soft_timeout] = x }
        o.on("--[no-]soft-timeout-raise", "also raise Oribi::RequestTimeout in the app (default off)") { |x| v[:soft_timeout_raise] = x }
        o.on("--rolling-interval SEC", Float, "pause between workers in a rolling restart (default 1)") { |x| v[:rolling_interval] = x }
        o.on("--refork-after N,N", Array, "refork workers from a warm one after N requests (default off)") do |x|
          v[:refork_after] = x.map { |n| Integer(n, 10) }
        rescue ArgumentError
          raise OptionParser::InvalidArgument, "--refork-after #{x.join(',')} (expected request counts)"
        end
        o.on("--oob-gc N", Integer, "run GC between requests every N requests; 0 = off (default 0)") { |x| v[:oob_gc] = x }
        o.on("--shutdown-timeout SEC", Float, "kill workers still busy this long after TERM (default 25)") { |x| v[:shutdown_timeout] = x }
        o.on("--access-log [FILE]", "log each request to FILE (default: stderr); off unless given") { |x| v[:access_log] = x || "-" }
        o.on("--access-log-format FMT", %w[combined ltsv json], "combined, ltsv or json (default combined)") { |x| v[:access_log_format] = x }
        o.on("--stdout FILE", "append stdout to FILE (reopened on USR1)") { |x| v[:stdout_path] = x }
        o.on("--stderr FILE", "append stderr to FILE (reopened on USR1)") { |x| v[:stderr_path] = x }
        o.on("--pid FILE", "write the server's pid to FILE") { |x| v[:pid_file] = x }
        o.on("--control URI", "control endpoint (stats, readyz, restart): unix:///PATH or tcp://HOST:PORT (default off)") { |x| v[:control] = x }
        o.on("--control-token TOKEN", "token the control endpoint requires; needed for TCP (default $ORIBI_CONTROL_TOKEN)") { |x| v[:control_token] = x }
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

      v[:rackup] = rest.first if rest.first
      v[:binds] = binds unless binds.empty?
      v
    end
  end
end
