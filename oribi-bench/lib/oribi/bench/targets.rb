# frozen_string_literal: true

require "uri"

module Oribi
  module Bench
    # A targets file, vegeta's http format, for mixed workloads: targets
    # separated by blank lines, each a `METHOD URL` line, then header lines
    # `Name: value`, then optionally `@path` for a body file (relative to
    # the targets file). Lines starting with # are comments. Requests are
    # sent in turn; every URL must name the same host and port (one address).
    module Targets
      Target = Struct.new(:method, :uri, :headers, :body, keyword_init: true)

      TOKEN = /\A[!#$%&'*+\-.^_`|~0-9A-Za-z]+\z/
      HEADER = /\A[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[^\r\n]*\z/

      module_function

      # The URI of an http:// or https:// URL with a host, else nil. A port
      # out of range raises: the engine would otherwise aim at it modulo 65536.
      def http_uri(url)
        uri = URI.parse(url)
        return unless uri.is_a?(URI::HTTP) && %w[http https].include?(uri.scheme) && uri.host && !uri.host.empty?
        raise UsageError, "bad port #{uri.port} in #{url} (1 to 65535)" unless (1..65_535).cover?(uri.port)

        uri
      rescue URI::InvalidURIError
        nil
      end

      # The raw request, built here so the C side stays byte-blind.
      # headers (-H) go on every request, before a target's own.
      def request(t, headers: [], keepalive: true, agent: "oribi-bench")
        headers += t.headers
        names = headers.map { |h| h.split(":", 2)[0].downcase }
        authority = t.uri.port == t.uri.default_port ? t.uri.host : "#{t.uri.host}:#{t.uri.port}"
        head = +"#{t.method} #{t.uri.request_uri} HTTP/1.1\r\n"
        head << "Host: #{authority}\r\n" unless names.include?("host")
        head << "User-Agent: #{agent}\r\n" unless names.include?("user-agent")
        headers.each { |h| head << "#{h}\r\n" }
        head << "Connection: close\r\n" unless keepalive
        head << "Content-Length: #{t.body.bytesize}\r\n" if t.body && !names.include?("content-length")
        head << "\r\n"
        head = head.b
        head << t.body.b if t.body
        head
      end

      # GET path on localhost: the request the bench scripts send.
      def get(path = "/", keepalive: true)
        request(Target.new(method: "GET", uri: URI("http://localhost#{path}"), headers: [], body: nil), keepalive: keepalive)
      end

      def load(path)
        parse(File.read(path), File.dirname(path), path)
      end

      def parse(text, dir = ".", name = "targets")
        targets = []
        text.each_line.with_index(1) do |raw, n|
          line = raw.chomp
          next if line.start_with?("#")

          if line.strip.empty?
            next
          elsif (m = /\A([A-Z]+) (\S+)\z/.match(line))
            uri = http_uri(m[2]) or raise UsageError, "#{name}:#{n}: http[s]://host:port/path expected"

            targets << Target.new(method: m[1], uri: uri, headers: [], body: nil)
          elsif targets.empty?
            raise UsageError, "#{name}:#{n}: METHOD URL expected"
          elsif line.start_with?("@")
            raise UsageError, "#{name}:#{n}: second body" if targets.last.body

            targets.last.body = File.binread(File.expand_path(line[1..], dir))
          elsif line.match?(HEADER)
            targets.last.headers << line
          else
            raise UsageError, "#{name}:#{n}: bad line #{line.inspect}"
          end
        end
        raise UsageError, "#{name}: no targets" if targets.empty?

        targets
      rescue URI::Error => e
        raise UsageError, "#{name}: #{e.message}"
      end
    end
  end
end
