# frozen_string_literal: true

require "socket"
require "uri"

module Oribi
  # Binds the sockets named by --bind URIs: tcp://HOST:PORT (IPv4, [IPv6]) and
  # unix:///PATH. Unix socket paths are checked for a live owner before a
  # stale file is replaced, and removed on exit by the process that made them.
  class Listeners
    Listener = Struct.new(:uri, :socket, :path, keyword_init: true) do
      def fileno = socket.fileno
      def unix? = !path.nil?
      def to_s = uri
    end

    attr_reader :all

    def initialize(binds, backlog: 1024, reuse_port: false, unix_mode: nil)
      @backlog = backlog
      @reuse_port = reuse_port
      @unix_mode = unix_mode
      @all = []
      @owner = Process.pid
      binds.each { |b| @all << bind(b) }
    rescue StandardError
      close
      raise
    end

    def fds = @all.map(&:fileno)

    # Closes this process's copies only (a worker that stops accepting).
    def close_sockets
      @all.each { |l| l.socket.close unless l.socket.closed? }
    end

    def close
      @all.each do |l|
        l.socket.close unless l.socket.closed?
        File.unlink(l.path) if l.path && Process.pid == @owner && File.socket?(l.path)
      rescue SystemCallError
        nil
      end
    end

    def self.parse(uri)
      case uri
      when %r{\Aunix://(/.+)\z} then [:unix, Regexp.last_match(1)]
      when %r{\Atcp://\[([0-9a-fA-F:.]+)\]:(\d+)\z}, %r{\Atcp://([^:/\[\]]+):(\d+)\z}
        port = Integer(Regexp.last_match(2), 10)
        raise ArgumentError, "port out of range in #{uri}" unless port.between?(0, 65_535)

        [:tcp, Regexp.last_match(1), port]
      else
        raise ArgumentError, "cannot bind #{uri.inspect}: use tcp://HOST:PORT, tcp://[V6]:PORT or unix:///PATH"
      end
    end

    private

    def bind(uri)
      kind, *rest = self.class.parse(uri)
      kind == :unix ? bind_unix(uri, rest[0]) : bind_tcp(uri, *rest)
    end

    def bind_tcp(uri, host, port)
      addr = Addrinfo.tcp(host, port)
      sock = Socket.new(addr.afamily, :STREAM, 0)
      sock.setsockopt(:SOCKET, :REUSEADDR, true)
      sock.setsockopt(:SOCKET, :REUSEPORT, true) if @reuse_port
      sock.setsockopt(:IPV6, :V6ONLY, true) if addr.ipv6?
      # Accepted sockets inherit these: no per-connection setsockopt.
      sock.setsockopt(:TCP, :NODELAY, true)
      # The kernel hands over a connection only once its request has arrived.
      sock.setsockopt(:TCP, :DEFER_ACCEPT, 1) if defined?(Socket::TCP_DEFER_ACCEPT)
      sock.bind(addr)
      sock.listen(@backlog)
      sock.close_on_exec = true
      Listener.new(uri: uri, socket: sock)
    rescue SystemCallError, SocketError => e
      sock&.close
      raise e.class, "#{uri}: #{e.message}"
    end

    def bind_unix(uri, path)
      if File.exist?(path)
        raise Errno::EEXIST, "#{uri}: exists and is not a socket" unless File.socket?(path)

        begin
          UNIXSocket.new(path).close
          raise Errno::EADDRINUSE, "#{uri}: another server is listening there"
        rescue Errno::ECONNREFUSED, Errno::ENOENT
          File.unlink(path) # stale: left by a server that died
        end
      end
      sock = Socket.new(:UNIX, :STREAM, 0)
      sock.bind(Socket.sockaddr_un(path))
      File.chmod(@unix_mode, path) if @unix_mode
      sock.listen(@backlog)
      sock.close_on_exec = true
      Listener.new(uri: uri, socket: sock, path: path)
    end
  end
end
