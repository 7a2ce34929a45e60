# frozen_string_literal: true

require "optparse"
require "socket"
require "timeout"

module Oribi
  # `oribi ctl COMMAND`: talks to a running server's control endpoint
  # (docs/CONTROL.md) and prints its answer. The address and token come
  # from --control / --token, else from the config file (-C, or
  # config/oribi.rb), else from ORIBI_CONTROL / ORIBI_CONTROL_TOKEN.
  # Exit status: 0 on a 2xx answer, 1 otherwise (`ready` on a draining
  # server), 2 when the endpoint cannot be reached or used.
  class Ctl
    COMMANDS = { "stats" => "/stats", "metrics" => "/metrics", "ready" => "/readyz", "health" => "/healthz",
                 "restart" => "/restart", "stop" => "/stop" }.freeze
    TIMEOUT = 10

    def self.run(argv, out: $stdout) = new.run(argv, out)

    def run(argv, out)
      opts = {}
      parser = OptionParser.new do |o|
        o.banner = "Usage: oribi ctl #{COMMANDS.keys.join('|')} [--control URI] [--token T] [-C FILE]"
        o.on("--control URI", "unix:///PATH or tcp://HOST:PORT") { |x| opts[:control] = x }
        o.on("--token TOKEN", "the server's control_token") { |x| opts[:token] = x }
        o.on("-C", "--config FILE", "read control and control_token from this config file") { |x| opts[:config_file] = x }
      end
      command, *rest = parser.parse(argv)
      raise OptionParser::InvalidArgument, "command #{command.inspect}: #{parser.banner}" unless COMMANDS.key?(command)

      path = COMMANDS[command]
      method = Control::ROUTES.fetch(path)
      raise OptionParser::NeedlessArgument, rest.join(" ") unless rest.empty?

      uri, token = address(opts)
      status, body = request(uri, token, method, path)
      out.write(body)
      (200..299).cover?(status) ? 0 : 1
    rescue OptionParser::ParseError, Config::Error, ArgumentError, SystemCallError, SocketError, IOError,
           Timeout::Error => e
      $stderr.puts "oribi ctl: #{e.message.lines.first.chomp}"
      2
    end

    private

    def address(opts)
      uri = opts[:control] || ENV["ORIBI_CONTROL"]
      token = opts[:token] || ENV["ORIBI_CONTROL_TOKEN"]
      if uri.nil? || token.nil?
        file = opts[:config_file] || Config.default_file
        if file
          config = Config.new
          Config.read(config, file)
          uri ||= config[:control]
          token ||= config[:control_token]
        end
      end
      raise ArgumentError, "no control endpoint: pass --control URI, -C FILE or set ORIBI_CONTROL" unless uri

      [uri, token]
    end

    # → [status, body]
    def request(uri, token, method, path)
      kind, host_or_path, port = Listeners.parse(uri)
      sock = kind == :unix ? UNIXSocket.new(host_or_path) : Socket.tcp(host_or_path, port, connect_timeout: TIMEOUT)
      auth = token ? "authorization: Bearer #{token}\r\n" : ""
      sock.write("#{method} #{path} HTTP/1.1\r\nhost: oribi\r\n#{auth}content-length: 0\r\nconnection: close\r\n\r\n")
      raw = +""
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + TIMEOUT
      loop do
        chunk = sock.read_nonblock(65_536, exception: false)
        break if chunk.nil?

        if chunk == :wait_readable
          left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
          raise Timeout::Error, "no answer from #{uri} in #{TIMEOUT} s" if left <= 0 || !sock.wait_readable(left)

          next
        end
        raw << chunk
      end
      answer(raw, uri)
    ensure
      sock&.close
    end

    # The whole answer (the endpoint closes after it), read with the codec
    # the server and the load generator use → [status, body].
    def answer(raw, uri)
      res = Parser.parse_response(raw)
      raise IOError, "not an HTTP answer from #{uri}" unless res[:status]

      body = body(raw.byteslice(res[:consumed]..), res) or raise IOError, "truncated answer from #{uri}"
      [res[:status], body]
    end

    # The body framed as the head says; nil when the answer stopped short.
    def body(rest, res)
      case res[:framing]
      when :length then rest.byteslice(0, res[:content_length]) if rest.bytesize >= res[:content_length]
      when :chunked
        chunked = Parser.decode_chunked(rest)
        chunked[:body] if chunked.key?(:rest)
      when :until_close then rest
      else ""
      end
    end
  end
end
