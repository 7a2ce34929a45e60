# frozen_string_literal: true

# the server, and the tools (the load generator drives load; process groups)
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../oribi-bench/lib", __dir__))
require "minitest/autorun"
require "socket"
require "tmpdir"
require "timeout"
require "etc"
require "oribi/tune/resources"
require "oribi/process_group"
require "oribi"
require "oribi/loadgen" # the load generator, for tests that drive load
require_relative "support/wait"
require_relative "support/process"
require_relative "support/user_env"

ROOT = File.expand_path("..", __dir__)
APPS = File.join(__dir__, "apps")

# A real server process started from exe/oribi, on a loopback TCP port and a
# unix socket, an Oribi::ProcessGroup stopped (TERM, then KILL) when the test
# is done.
class ServerProcess
  attr_reader :port, :sock, :log_path

  # The servers the running test started, for ServerLogs below
  def self.started = (Thread.current[:oribi_servers] ||= [])

  # spawn: extra Process.spawn options, e.g. rlimit_nofile: 64; exe: the
  # oribi command to run (a copy elsewhere)
  def initialize(app, *args, workers: 0, tcp: true, unix: true, env: {}, sock: nil, port: nil, spawn: {},
                 exe: File.join(ROOT, "exe/oribi"))
    @unix = unix
    app = File.join(APPS, app) unless app.start_with?("/", "./") # ./: relative to spawn's chdir
    # A free port may be taken by another test process before the server
    # binds it (tests run in parallel): then again, on another.
    3.times do |attempt|
      @dir = Dir.mktmpdir("oribi-test")
      @sock = sock || File.join(@dir, "s.sock")
      @log_path = File.join(@dir, "log")
      @port = port || free_port if tcp
      @given_port = port
      binds = []
      binds += ["-b", "tcp://127.0.0.1:#{@port}"] if tcp
      binds += ["-b", "unix://#{@sock}"] if unix
      # Its own binds last: once its socket accepts, the listeners a test
      # named in args are bound too (the server binds in order).
      cmd = [RbConfig.ruby, exe, *(["-w", workers.to_s] if workers), *args, *binds, app]
      @group = Oribi::ProcessGroup.new(cmd, env: env, log: @log_path, **spawn)
      ServerProcess.started << self
      begin
        wait_ready
        break
      rescue StandardError
        stop(:KILL) # a server that never got ready must not outlive the test
        raise unless tcp && port.nil? && attempt < 2 && log.include?("tcp://127.0.0.1:#{@port}: Address already in use")

        @final_log = nil
      end
    end
  end

  def pid = @group.pid
  def log = @final_log || (File.read(@log_path) if File.exist?(@log_path)).to_s

  # The log once it matches re (or as it is after timeout): what a worker
  # logs can come just after the client saw the response.
  def log_until(re, timeout: 5) = wait_until(timeout: timeout) { (text = log).match?(re) && text } || log

  # pids of the master's live children (the workers)
  def worker_pids = @group.worker_pids

  # VmRSS in KiB and the open fds of a process of this server
  def rss_kib(pid = self.pid) = File.read("/proc/#{pid}/status")[/^VmRSS:\s+(\d+)/, 1].to_i
  def fd_count(pid = self.pid) = Dir.children("/proc/#{pid}/fd").size

  # CPU seconds (user + system) a process of this server has used
  def cpu_seconds(pid = self.pid) = Oribi::Tune::Resources.cpu_seconds([pid])

  def tcp = TCPSocket.new("127.0.0.1", @port)

  # One connection per path, each with its GET sent and nothing read yet.
  def send_gets(paths) = paths.map { |path| tcp.tap { |s| s.write("GET #{path} HTTP/1.1\r\nHost: t\r\n\r\n") } }
  def unix = UNIXSocket.new(@sock)

  # Same request through both transports when both are bound.
  def each_transport
    yield(:tcp, method(:tcp)) if @port
    yield(:unix, method(:unix)) if File.socket?(@sock)
  end

  # The exit status once the server ends by itself (nil after timeout):
  # for a test that already sent the signal and must not send another.
  def wait_exit(timeout) = @group.reap(timeout: timeout)

  # Whether it has ended (reaped, without waiting), and how.
  def exited? = @group.exited?
  def status = @group.status

  # → the exit status; the log is kept, its directory removed.
  def stop(signal = :TERM, timeout: 15)
    @group.stop(signal, timeout: timeout)
  ensure
    unless @final_log
      @final_log = File.read(@log_path)
      FileUtils.rm_rf(@dir)
    end
  end

  private

  # Ready once every listener accepts: the server binds them one after the
  # other, so TCP may accept before the unix socket file exists. A port
  # this class chose must be held by this server: two tests can be handed
  # the same free port, and the other's server then accepts on it while
  # this one fails to bind. The bound is a ceiling for a loaded machine
  # (an ASan build beside CI's chroot builds took more than 20 s to boot;
  # qemu's arm64 likewise): a ready server ends the wait at once.
  def wait_ready(timeout = 60)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      begin
        tcp.close if @port
        unix.close if @unix || !@port
        return if !@port || @given_port || listens_on?(@group, @port)
      rescue Errno::ECONNREFUSED, Errno::ENOENT
        nil
      end
      raise "server exited before it was ready:\n#{log}" if @group.exited?
      raise "server not ready in #{timeout} s:\n#{log}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.02 # polling for a condition (the socket accepting), bounded above
    end
  end
end

# Reading raw HTTP/1.1 responses off a socket, with a deadline on every read.
module HTTPClient
  Response = Struct.new(:status, :headers, :body, :raw) do
    def [](name) = headers[name.downcase]
  end

  module_function

  def read_bytes(sock, n, deadline)
    buf = +""
    while buf.bytesize < n
      chunk = read_some(sock, n - buf.bytesize, deadline)
      raise EOFError, "EOF after #{buf.bytesize} of #{n} bytes" unless chunk

      buf << chunk
    end
    buf
  end

  def read_some(sock, max, deadline)
    loop do
      r = sock.read_nonblock(max, exception: false)
      return r unless r == :wait_readable

      left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
      raise Timeout::Error, "no response in time" if left <= 0

      sock.wait_readable(left)
    end
  rescue Errno::ECONNRESET
    nil
  end

  def read_line(sock, deadline)
    line = +""
    until line.end_with?("\n")
      c = read_some(sock, 1, deadline)
      return line.empty? ? nil : line unless c

      line << c
    end
    line
  end

  # One response; nil on a clean EOF before it. head: true for HEAD requests.
  def read_response(sock, timeout: 10, head: false)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    status_line = read_line(sock, deadline) or return nil
    raw = +status_line
    status = status_line[/\AHTTP\/1\.[01] (\d{3})/, 1] or raise "bad status line #{status_line.inspect}"
    headers = {}
    while (line = read_line(sock, deadline)) && line != "\r\n"
      raw << line
      name, value = line.chomp.split(":", 2)
      key = name.downcase
      headers[key] = headers.key?(key) ? [*headers[key], value.strip] : value.strip
    end
    code = status.to_i
    body = +""
    if head || code < 200 || code == 204 || code == 304
      # no body
    elsif headers["transfer-encoding"]
      loop do
        line = read_line(sock, deadline) or raise EOFError, "EOF inside a chunked body"
        size = line.to_i(16)
        body << read_bytes(sock, size, deadline) if size.positive?
        read_line(sock, deadline)
        break if size.zero?
      end
    elsif headers["content-length"]
      body = read_bytes(sock, headers["content-length"].to_i, deadline)
    else
      while (c = read_some(sock, 65_536, deadline))
        body << c
      end
    end
    return read_response(sock, timeout: timeout, head: head) if code == 100

    Response.new(code, headers, body, raw)
  end

  # true when the peer closed (EOF or reset) within timeout
  # Everything up to the server's close; raises Timeout::Error when it
  # stays open past timeout.
  def read_to_close(sock, timeout: 10)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    out = +""
    while (chunk = read_some(sock, 65_536, deadline))
      out << chunk
    end
    out
  end

  def closed?(sock, timeout: 5)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      data = read_some(sock, 4096, deadline)
      return true if data.nil?
    end
  rescue Timeout::Error
    false
  end

  def request(sock, path = "/", method: "GET", headers: {}, body: nil)
    h = { "Host" => "test" }.merge(headers)
    h["Content-Length"] = body.bytesize.to_s if body && !h.key?("Transfer-Encoding")
    sock.write("#{method} #{path} HTTP/1.1\r\n" + h.map { |k, v| "#{k}: #{v}\r\n" }.join + "\r\n" + body.to_s)
    read_response(sock, head: method == "HEAD")
  end
end

# A server shared by the tests of one class (started on first use).
module SharedServer
  def self.included(base)
    base.extend(ClassMethods)
    Minitest.after_run { base.shared_server_stop }
  end

  module ClassMethods
    def server(app, *args, **kw)
      @server_spec = [app, args, kw]
    end

    def shared_server
      @shared_server ||= ServerProcess.new(@server_spec[0], *@server_spec[1], **@server_spec[2])
    end

    def shared_server_stop
      @shared_server&.stop
    end
  end

  def server = self.class.shared_server

  # A failed test whose shared server is gone says how it ended: the
  # tests after it fail to connect and would say nothing more.
  def after_teardown
    super
    srv = self.class.instance_variable_get(:@shared_server)
    return if passed? || srv.nil? || !srv.exited?

    warn "#{self.class}: the shared server ended (#{srv.status.inspect}); its log:\n#{srv.log}"
  end
end

# A test that fails or errs (a Timeout in a client, say, whose message
# cannot name the server) shows the end of the log of each server it
# started, read after its teardown stopped them.
module ServerLogs
  def after_teardown
    super
    unless passed? || skipped?
      ServerProcess.started.each do |srv|
        text = srv.log
        $stdout.puts "--- #{name}: the last lines of server #{srv.pid}'s log\n#{text.lines.last(40).join}"
      end
    end
  ensure
    ServerProcess.started.clear
  end
end
Minitest::Test.prepend(ServerLogs)
