# frozen_string_literal: true

require "socket"
require "rack/utils"

module Oribi
  # The control endpoint (docs/CONTROL.md): a small HTTP/1.1 server run by
  # the master inside its own loop, on a socket of its own (`control`).
  # Everything is non-blocking and bounded — at most MAX_CLIENTS at a time,
  # a request head of MAX_HEAD bytes, CLIENT_TIMEOUT seconds each, one
  # request per connection — so a slow or hostile client can never hold the
  # master up: it only loses its connection. Requests are answered by a
  # handler (the master) given the method, the path and the query.
  class Control
    MAX_CLIENTS = 16
    MAX_HEAD = 8192
    MAX_BODY = 1024 # POST bodies are not used; a small one is read and ignored
    CLIENT_TIMEOUT = 5.0
    # path => the method it answers (the master answers them, `oribi ctl` asks)
    ROUTES = { "/stats" => "GET", "/metrics" => "GET", "/readyz" => "GET", "/healthz" => "GET",
               "/restart" => "POST", "/stop" => "POST" }.freeze
    REASONS = { 200 => "OK", 202 => "Accepted", 400 => "Bad Request", 401 => "Unauthorized",
                403 => "Forbidden", 404 => "Not Found", 405 => "Method Not Allowed",
                408 => "Request Timeout", 409 => "Conflict", 413 => "Content Too Large",
                431 => "Request Header Fields Too Large", 503 => "Service Unavailable" }.freeze

    Client = Struct.new(:io, :buf, :out, :deadline, keyword_init: true)

    attr_reader :uri

    # uri: tcp://HOST:PORT or unix:///PATH (as for bind). A fd inherited
    # from the previous generation (hot restart) is used instead of binding.
    def initialize(uri, token: nil, fd: nil)
      @uri = uri
      @token = token
      @clients = []
      kind, host_or_path, port = Listeners.parse(uri)
      # Whoever reaches a TCP port could stop the server: never without a token.
      raise Config::Error, "control #{uri} is TCP: set control_token (or ORIBI_CONTROL_TOKEN) too" if kind == :tcp && token.nil?

      @path = host_or_path if kind == :unix
      @owned = fd.nil?
      @server = fd ? Socket.for_fd(fd) : bind(kind, host_or_path, port)
      @server.close_on_exec = true
      @server.autoclose = true
    end

    def fileno = @server.fileno
    def closed? = @server.closed?

    # The IOs the master waits on: [readable, writable].
    def wait_ios
      readers = @clients.reject(&:out).map(&:io)
      readers << @server unless @server.closed? || @clients.size >= MAX_CLIENTS
      [readers, @clients.select(&:out).map(&:io)]
    end

    # The next client deadline, for the master's wait.
    def next_deadline = @clients.map(&:deadline).min

    # Accepts, reads, answers and writes what can be done without waiting.
    # The handler: (method, path, query) → [status, content_type, body].
    def serve(&handler)
      accept
      now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      @clients.dup.each do |c|
        if c.deadline < now
          drop(c)
        elsif c.out
          write(c)
        else
          read(c, &handler)
        end
      end
    end

    # The previous generation handed over: the unix socket file is ours.
    def take_ownership! = (@owned = true)

    # A next generation serves the endpoint now: stop answering, keep the file.
    def hand_over!
      @owned = false
      close
    end

    # In a forked worker: the master's sockets are not its own.
    def close_in_child
      @clients.each { |c| c.io.close unless c.io.closed? }
      @server.close unless @server.closed?
    end

    def close
      @clients.each { |c| flush_and_drop(c) }
      @server.close unless @server.closed?
      File.unlink(@path) if @owned && @path && File.socket?(@path)
    rescue SystemCallError
      nil
    end

    private

    def bind(kind, host_or_path, port)
      if kind == :unix
        path = host_or_path
        Listeners.remove_stale(path, "control #{@uri}") if File.socket?(path)
        sock = Socket.new(:UNIX, :STREAM, 0)
        # Only the owner may connect: the socket's permissions are its guard.
        old = File.umask(0o177)
        begin
          sock.bind(Socket.sockaddr_un(path))
        ensure
          File.umask(old)
        end
      else
        addr = Addrinfo.tcp(host_or_path, port)
        sock = Socket.new(addr.afamily, :STREAM, 0)
        sock.setsockopt(:SOCKET, :REUSEADDR, true)
        sock.bind(addr)
      end
      sock.listen(MAX_CLIENTS)
      sock
    rescue SystemCallError, SocketError => e
      sock&.close
      raise e.class, "control #{@uri}: #{e.message}"
    end

    def accept
      while @clients.size < MAX_CLIENTS && !@server.closed?
        io, = @server.accept_nonblock(exception: false)
        break if io == :wait_readable || io.nil?

        io.close_on_exec = true
        @clients << Client.new(io: io, buf: +"", deadline: Process.clock_gettime(Process::CLOCK_MONOTONIC) + CLIENT_TIMEOUT)
      end
    rescue SystemCallError
      nil
    end

    def read(c, &handler)
      loop do
        data = c.io.read_nonblock(4096, exception: false)
        return if data == :wait_readable
        return drop(c) if data.nil?

        c.buf << data
        break if c.buf.bytesize > MAX_HEAD + MAX_BODY || complete?(c.buf)
      end
      answer(c, *handle(c.buf, &handler))
    rescue SystemCallError, IOError
      drop(c)
    end

    def complete?(buf)
      head_end = buf.index("\r\n\r\n") or return false
      length = buf[0, head_end][/^content-length:[ \t]*(\d+)[ \t]*\r?$/i, 1].to_i
      buf.bytesize >= head_end + 4 + [length, MAX_BODY + 1].min
    end

    # → [status, content_type, body]
    def handle(buf)
      head_end = buf.index("\r\n\r\n")
      return error(431) if head_end.nil? || head_end > MAX_HEAD

      lines = buf[0, head_end].split("\r\n")
      method, target, version = lines.shift.to_s.split(" ", 3)
      return error(400) unless method&.match?(/\A[A-Z]{1,16}\z/) && target&.start_with?("/") && version&.match?(%r{\AHTTP/1\.[01]\z})

      headers = {}
      lines.each do |l|
        name, value = l.split(":", 2)
        return error(400) unless value && name.match?(/\A[!#$%&'*+\-.^_`|~0-9A-Za-z]+\z/)

        headers[name.downcase] = value.strip
      end
      return error(400) if headers.key?("transfer-encoding")
      return error(413) if headers["content-length"].to_i > MAX_BODY

      path, query = target.split("?", 2)
      if @token && !(status = authorize(headers["authorization"], query)).nil?
        return [status, "text/plain", "#{REASONS[status]}\n",
                (status == 401 ? { "www-authenticate" => 'Bearer realm="oribi"' } : {})]
      end
      yield(method, path, query)
    end

    # nil when allowed, else the status: 401 no token, 403 a wrong one.
    def authorize(authorization, query)
      given = authorization&.[](/\ABearer[ \t]+(\S+)\z/i, 1)
      given ||= query&.split("&")&.filter_map { |kv| kv.split("=", 2)[1] if kv.start_with?("token=") }&.first
      return 401 if given.nil? || given.empty?

      Rack::Utils.secure_compare(given, @token) ? nil : 403
    end

    def error(status) = [status, "text/plain", "#{REASONS[status]}\n"]

    def answer(c, status, type, body, headers = {})
      extra = headers.map { |k, v| "#{k}: #{v}\r\n" }.join
      c.out = +"HTTP/1.1 #{status} #{REASONS.fetch(status, 'Status')}\r\ncontent-type: #{type}\r\n" \
               "content-length: #{body.bytesize}\r\ncache-control: no-store\r\n#{extra}connection: close\r\n\r\n#{body}"
      write(c)
    end

    def write(c)
      n = c.io.write_nonblock(c.out, exception: false)
      return if n == :wait_writable

      c.out = c.out.byteslice(n..)
      drop(c) if c.out.empty?
    rescue SystemCallError, IOError
      drop(c)
    end

    def flush_and_drop(c)
      c.io.write_nonblock(c.out, exception: false) if c.out && !c.io.closed?
    rescue SystemCallError, IOError
      nil
    ensure
      drop(c)
    end

    def drop(c)
      @clients.delete(c)
      c.io.close unless c.io.closed?
    end
  end
end
