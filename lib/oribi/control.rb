# frozen_string_literal: true

require "socket"
require "rack/utils"
require "digest"

module Oribi
  # The control endpoint (docs/CONTROL.md): a small HTTP/1.1 server run by
  # the master inside its own loop, on a socket of its own (`control`).
  # Everything is non-blocking and bounded — at most MAX_CLIENTS at a time,
  # a request line and header section of MAX_HEAD bytes each, HEAD_TIMEOUT
  # seconds to send them and CLIENT_TIMEOUT in all, one request per
  # connection — so a slow or hostile client can never hold the master up:
  # it only loses its connection. When every slot is taken, a new client
  # takes the slot of the oldest one still sending its request: idle
  # connections cannot starve a liveness probe that sends its request at once. Requests are read with the
  # workers' own parser and answered by a handler (the master) given the
  # method, the path and the query.
  class Control
    MAX_CLIENTS = 16
    MAX_HEAD = 8192
    MAX_BODY = 1024 # POST bodies are not used; a small one is read and ignored
    CLIENT_TIMEOUT = 5.0
    # A probe sends its request as soon as it connects: one that takes longer
    # than this is more likely holding a slot than slow.
    HEAD_TIMEOUT = 2.0
    # path => the method it answers (the master answers them, `oribi ctl` asks)
    ROUTES = { "/stats" => "GET", "/metrics" => "GET", "/readyz" => "GET", "/healthz" => "GET",
               "/restart" => "POST", "/stop" => "POST" }.freeze
    PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"

    # The answer to a request, from what master knows (#stats, #readiness)
    # and does (#control_restart, #control_stop: their answers, the action
    # once it is out). → [status, content type, body(, headers)]
    def self.route(method, path, master)
      want = ROUTES[path] or return [404, "text/plain", "Not Found\n"]
      return [405, "text/plain", "use #{want}\n", { "allow" => want }] unless method == want

      case path
      when "/stats" then [200, "application/json", Stats.json(master.stats)]
      when "/metrics" then [200, PROMETHEUS, Stats.prometheus(master.stats)]
      when "/readyz"
        state = master.readiness
        [state == "ready" ? 200 : 503, "text/plain", "#{state}\n"]
      when "/healthz" then [200, "text/plain", "ok\n"]
      when "/restart" then master.control_restart
      when "/stop" then master.control_stop
      end
    end

    Client = Struct.new(:io, :buf, :out, :deadline, keyword_init: true)

    attr_reader :uri

    # uri: tcp://HOST:PORT or unix:///PATH (as for bind). A fd inherited
    # from the previous generation (hot restart) is used instead of binding.
    # takeover: a previous generation not of our making (start_server's)
    # may still serve the endpoint, and this one replaces it: a unix socket
    # is bound beside it and renamed over it, a TCP port is shared
    # (SO_REUSEPORT, which that generation set too) until it closes.
    def initialize(uri, token: nil, fd: nil, takeover: false)
      @uri = uri
      @token = token
      @token_digest = Digest::SHA256.digest(token) if token
      @clients = []
      kind, host_or_path, port = Listeners.parse(uri)
      # (a TCP endpoint has a token: Config#check!)
      @path = host_or_path if kind == :unix
      @owned = fd.nil?
      @takeover = takeover
      @server = fd ? Socket.for_fd(fd) : bind(kind, host_or_path, port)
      @made = Listeners.identity(@path) if @path && @owned
      @server.close_on_exec = true
      @server.autoclose = true
    end

    def fileno = @server.fileno
    def closed? = @server.closed?

    # The IOs the master waits on: [readable, writable].
    def wait_ios
      readers = @clients.reject(&:out).map(&:io)
      readers << @server unless @server.closed? || (full? && !oldest_partial)
      [readers, @clients.select(&:out).map(&:io)]
    end

    # The next client deadline, for the master's wait.
    def next_deadline = @clients.map(&:deadline).min

    # Accepts, reads, answers and writes what can be done without waiting.
    # The handler: (method, path, query) → [status, content_type, body].
    def serve(&handler)
      accept(&handler)
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

    # A stand-in (HotRestart::StandIn) whose master's loop runs again: no new
    # clients (the master takes them), those it took are answered.
    def stop_accepting
      @owned = false
      @server.close unless @server.closed?
    end

    def idle? = @clients.empty?

    # In a forked worker: the master's sockets are not its own.
    def close_in_child
      @clients.each { |c| c.io.close unless c.io.closed? }
      @server.close unless @server.closed?
    end

    def close
      @clients.each { |c| flush_and_drop(c) }
      @server.close unless @server.closed?
      # not a file a next generation bound there since
      File.unlink(@path) if @owned && @path && File.socket?(@path) && (@made.nil? || Listeners.identity(@path) == @made)
    rescue SystemCallError
      nil
    end

    private

    def bind(kind, host_or_path, port)
      if kind == :unix
        sock = bind_unix(host_or_path)
      else
        addr = Addrinfo.tcp(host_or_path, port)
        sock = Socket.new(addr.afamily, :STREAM, 0)
        sock.setsockopt(:SOCKET, :REUSEADDR, true)
        sock.setsockopt(:SOCKET, :REUSEPORT, true) if @takeover
        sock.bind(addr)
      end
      sock.listen(MAX_CLIENTS)
      sock
    rescue SystemCallError, SocketError => e
      sock&.close
      raise e.class, "control #{@uri}: #{e.message}"
    end

    def bind_unix(path)
      raise Errno::EEXIST, "control #{@uri}: exists and is not a socket" if File.exist?(path) && !File.socket?(path)

      Listeners.remove_stale(path, "control #{@uri}") if File.socket?(path) && !@takeover
      # Taking over: bound under a name of our own in the same directory,
      # then renamed over the live one, so that a client always finds one.
      at = @takeover ? File.join(File.dirname(path), ".oribi-control-#{Process.pid}") : path
      File.unlink(at) if @takeover && File.socket?(at)
      sock = Socket.new(:UNIX, :STREAM, 0)
      # Only the owner may connect: the socket's permissions are its guard.
      old = File.umask(0o177)
      begin
        sock.bind(Socket.sockaddr_un(at))
      ensure
        File.umask(old)
      end
      File.rename(at, path) if at != path
      sock
    rescue StandardError
      sock&.close
      raise
    end

    # A client is read as soon as it is accepted, so that one whose request
    # is already in is answered before a later one could take its slot.
    def accept(&handler)
      until @server.closed? || (full? && !oldest_partial)
        io, = @server.accept_nonblock(exception: false)
        break if io == :wait_readable || io.nil?

        drop(oldest_partial) if full?
        io.close_on_exec = true
        c = Client.new(io: io, buf: +"", deadline: Process.clock_gettime(Process::CLOCK_MONOTONIC) + HEAD_TIMEOUT)
        @clients << c
        read(c, &handler)
      end
    rescue SystemCallError
      nil
    end

    def full? = @clients.size >= MAX_CLIENTS

    # Clients are kept in the order they came: the first not yet answered.
    def oldest_partial = @clients.find { |c| c.out.nil? }

    def read(c, &handler)
      loop do
        data = c.io.read_nonblock(4096, exception: false)
        return if data == :wait_readable
        return drop(c) if data.nil?

        c.buf << data
        req = parse(c.buf)
        return answer(c, *handle(req, &handler)) if req
      end
    rescue SystemCallError, IOError
      drop(c)
    end

    # The server's own request parser (Oribi::Parser): nil until the head
    # and its small body are in, else the parse (with :error when refused).
    def parse(buf)
      req = Parser.parse(buf, max_request_line: MAX_HEAD, max_header_bytes: MAX_HEAD)
      return nil if req[:incomplete]
      return req if req[:error] || req[:chunked] || req[:content_length].to_i > MAX_BODY

      buf.bytesize >= req[:consumed] + req[:content_length].to_i ? req : nil
    end

    # → [status, content_type, body]
    def handle(req)
      return error(req[:error]) if req[:error]
      return error(400) if req[:chunked] # POST bodies are not used: no decoder here
      return error(413) if req[:content_length].to_i > MAX_BODY

      path, query = req[:path].split("?", 2)
      if @token && !(status = authorize(field(req, "authorization"), query)).nil?
        return [status, "text/plain", "#{reason(status)}\n",
                (status == 401 ? { "www-authenticate" => 'Bearer realm="oribi"' } : {})]
      end
      yield(req[:method], path, query)
    rescue StandardError => e # the master answers on: a report that fails is this request's 500
      Log.error("control: #{req[:method]} #{path}: answered 500", e)
      error(500)
    end

    def field(req, name) = req[:headers].find { |n, _| n.casecmp?(name) }&.last

    # nil when allowed, else the status: 401 no token, 403 a wrong one.
    def authorize(authorization, query)
      given = authorization&.[](/\ABearer[ \t]+(\S+)\z/i, 1)
      given ||= query&.split("&")&.filter_map { |kv| kv.split("=", 2)[1] if kv.start_with?("token=") }&.first
      return 401 if given.nil? || given.empty?

      # Digests of one length: secure_compare returns early on a length
      # mismatch, and response times would reveal the token's length.
      Rack::Utils.secure_compare(Digest::SHA256.digest(given), @token_digest) ? nil : 403
    end

    def reason(status) = Rack::Utils::HTTP_STATUS_CODES.fetch(status, "Status")

    def error(status) = [status, "text/plain", "#{reason(status)}\n"]

    def answer(c, status, type, body, headers = {})
      c.deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + CLIENT_TIMEOUT
      extra = headers.map { |k, v| "#{k}: #{v}\r\n" }.join
      c.out = +"HTTP/1.1 #{status} #{reason(status)}\r\ncontent-type: #{type}\r\n" \
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
