# frozen_string_literal: true

require "socket"
require "tmpdir"
require "fileutils"

# Accepts connections on a thread, serves each on its own thread. The
# handler gets (socket, request head, index of the request on this
# connection) and returns :keep to read another request, else the
# connection is closed.
class TinyServer
  attr_reader :port, :path

  def initialize(kind = :tcp, host: "127.0.0.1", &handler)
    @handler = handler
    @accepted = 0
    @lock = Mutex.new
    if kind == :unix
      @dir = Dir.mktmpdir("oribi-lg")
      @path = File.join(@dir, "s.sock")
      @server = UNIXServer.new(@path)
    else
      @server = TCPServer.new(host, 0)
      @port = @server.addr[1]
    end
    @threads = []
    @acceptor = Thread.new { accept_loop }
  end

  # A TCP server running handler (as for new) while the block runs; the
  # block gets its URL.
  def self.serving(handler)
    server = new(&handler)
    yield "http://127.0.0.1:#{server.port}/"
  ensure
    server&.close
  end

  def accepted
    @lock.synchronize { @accepted }
  end

  def target
    @path ? { unix_path: @path } : { host: "127.0.0.1", port: @port }
  end

  def close
    @server.close
    @acceptor.join(2)
    @threads.each { |t| t.kill.join(2) }
    FileUtils.rm_rf(@dir) if @dir
  end

  private

  def accept_loop
    loop do
      sock = @server.accept
      sock.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1) unless @path
      @lock.synchronize { @accepted += 1 }
      @threads << Thread.new(sock) { |s| serve(s) }
    end
  rescue IOError, Errno::EBADF
    nil # closed by #close
  end

  def serve(sock)
    index = 0
    while (head = read_head(sock))
      break unless @handler.call(sock, head, index) == :keep

      index += 1
    end
  rescue Errno::ECONNRESET, Errno::EPIPE, IOError
    nil # the load generator hung up: its business
  ensure
    sock.close unless sock.closed?
  end

  def read_head(sock)
    buf = +""
    buf << sock.readpartial(65_536) until buf.include?("\r\n\r\n")
    buf
  rescue EOFError
    nil
  end
end
