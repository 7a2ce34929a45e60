# frozen_string_literal: true

# Open event streams beside a hello. N clients each ask for /sse, an event
# stream whose body yields an event every --every seconds and sleeps in
# between (a plain Rack each body: no app change); one client asks for
# hello every 10 ms on a kept-alive connection meanwhile. One worker,
# --threads threads, for each server in turn. Once every stream is open
# (read by bench/sse_client.c, one process with epoll), for --window
# seconds (--events × --every + 1 unless given), printed per server: the
# streams that got at least --events events, how late the events came
# (each carries the time it was due; p50, p99), hello's latency (a hello
# not answered in 2 s, or whose connection closed, is counted apart and
# asked again on a new connection), the worker's RSS grown per open
# stream, and the worker's CPU in the window (100 % = one CPU).
#
#   bundle exec ruby bench/streams.rb [--clients 300] [--every 0.5] [--events 3] [--window SEC]
#       [--threads 3] [--servers oribi,puma] [--oribi-args "--max-streams 1000"] [--env NAME=VALUE]
#       [--app each|broadcast]
require "etc"
require "optparse"
require "rbconfig"
require "shellwords"
require "io/wait"
require "socket"
require "tmpdir"
require "fileutils"
require_relative "../test/support/wait"
require_relative "../oribi-bench/lib/oribi/process_group"
require_relative "peer_servers"

module Streams
  APP = <<~RUBY
    EVERY = Float(ENV.fetch("EVERY_SECONDS"))
    class Events
      def each
        due = Process.clock_gettime(Process::CLOCK_REALTIME)
        loop do
          yield "data: \#{due}\\n\\n"
          due += EVERY
          pause = due - Process.clock_gettime(Process::CLOCK_REALTIME)
          sleep pause if pause.positive?
        end
      end
    end
    run lambda { |env|
      next [200, {}, ["hello"]] unless env["PATH_INFO"] == "/sse"
      [200, { "content-type" => "text/event-stream" }, Events.new]
    }
  RUBY

  # --app broadcast: the same events written by one thread to every
  # stream, each stream a socket the app took with a partial hijack
  # (rack.hijack in the response headers; the server writes the head):
  # no thread or fiber per stream. Streams are due in the order they
  # came, each EVERY after its last, so one queue keeps them in order; a
  # stream whose socket does not take its event at once is dropped.
  BROADCAST = <<~RUBY
    EVERY = Float(ENV.fetch("EVERY_SECONDS"))
    DUE = Thread::Queue.new # [due, io], in due order
    ONCE = Mutex.new
    # Started by the first request: a thread started as the app loads stays in the master.
    def broadcaster = ONCE.synchronize { $broadcaster ||= Thread.new { broadcast } }
    def broadcast
      loop do
        due, io = DUE.pop
        pause = due - Process.clock_gettime(Process::CLOCK_REALTIME)
        sleep pause if pause.positive?
        if io.write_nonblock("data: \#{due}\n\n", exception: false).is_a?(Integer)
          DUE << [due + EVERY, io]
        else
          io.close
        end
      rescue IOError, SystemCallError
        io.close unless io.closed?
      end
    end
    # The first event at once, the next EVERY later: no later than any
    # queued (each was queued EVERY after a time before now), so the queue
    # stays in due order.
    def opened(io)
      now = Process.clock_gettime(Process::CLOCK_REALTIME)
      io.write("data: \#{now}\\n\\n")
      DUE << [now + EVERY, io]
    end
    run lambda { |env|
      next [200, {}, ["hello"]] unless env["PATH_INFO"] == "/sse"
      broadcaster
      [200, { "content-type" => "text/event-stream", "rack.hijack" => method(:opened) }, []]
    }
  RUBY

  module_function

  def command(server, dir, port, o)
    PeerServers.command(server, dir, port, File.join(dir, "app.ru"), workers: 1,
                        oribi: ["-t", o[:threads].to_s, "--max-connections", (o[:clients] + 64).to_s, *o[:oribi_args]],
                        puma: ["threads #{o[:threads]}, #{o[:threads]}"])
  end

  def run(server, o)
    dir = Dir.mktmpdir("oribi-streams")
    File.write(File.join(dir, "app.ru"), o[:app] == "broadcast" ? BROADCAST : APP)
    port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
    log = File.join(dir, "log")
    group = Oribi::ProcessGroup.new(command(server, dir, port, o), log: log, env: o[:env].merge("EVERY_SECONDS" => o[:every].to_s),
                                                                   rlimit_nofile: o[:clients] + 256)
    ready = wait_until(timeout: 60) { (TCPSocket.new("127.0.0.1", port).close || true) rescue false } # rubocop:disable Style/RescueModifier
    abort File.read(log) unless ready
    hello = TCPSocket.new("127.0.0.1", port)
    3.times { get(hello, "/"); read_hello(hello, now + 5) } # warm
    worker = group.worker_pids.first || group.pid
    rss0 = rss_kib(worker)
    feeders = [Feeder.new(dir, port, o[:clients], o[:events])]
    feeders.each(&:opened) # every stream asked for
    t0 = now + 0.2
    t1 = t0 + o[:window]
    feeders.each { |f| f.measure(t0, t1) }
    lat = []
    unanswered = 0
    sleep 0.01 while now < t0 # the window's start, which the feeders were told
    cpu0 = cpu_seconds(worker)
    while now < t1
      t = now
      get(hello, "/")
      if read_hello(hello, t + HELLO_PATIENCE)
        lat << now - t
      else # closed, or no answer in time: counted, and asked again on a new connection
        unanswered += 1
        hello.close
        hello = TCPSocket.new("127.0.0.1", port)
      end
      sleep 0.01
    end
    rss1 = rss_kib(worker)
    cpu = (cpu_seconds(worker) - cpu0) / o[:window]
    results = feeders.map(&:result)
    late = results.flat_map(&:last).sort
    lat.sort!
    { fed: results.sum(&:first), late50: pct(late, 0.5), late99: pct(late, 0.99), p50: pct(lat, 0.5),
      p99: pct(lat, 0.99), max: lat.last, hellos: lat.size, unanswered: unanswered,
      kib: (rss1 - rss0).fdiv(o[:clients]), cpu: cpu }
  ensure
    feeders&.each(&:close)
    group&.stop
    FileUtils.rm_rf(dir) if dir
  end

  def get(s, path) = s.write("GET #{path} HTTP/1.1\r\nHost: t\r\n\r\n")

  def pct(sorted, q) = sorted[[(sorted.size * q).floor, sorted.size - 1].min]

  # The streams' clients: bench/sse_client.c (built here), one process
  # with epoll, so that ten thousand streams cost the client little and
  # what is measured is the server's lateness. It opens them, says so, then
  # counts what comes within the window.
  class Feeder
    def initialize(dir, port, n, events)
      client = File.join(dir, "sse_client")
      system("cc", "-O2", "-o", client, File.join(__dir__, "sse_client.c"), exception: true)
      @io = IO.popen([client, port.to_s, n.to_s, "/sse", events.to_s], "r+")
    end

    def opened = @io.gets == "open\n" || abort("the stream clients failed")
    def measure(t0, t1) = @io.puts("#{t0} #{t1}") || @io.flush

    # [streams that got their events within the window, each event's lateness in s]
    def result
      fed = @io.gets[/\Afed (\d+)/, 1].to_i
      late = @io.each_line.map { |l| l.to_i / 1e6 }
      @io.close
      @io = nil
      [fed, late]
    end

    def close
      return unless @io

      Process.kill(:KILL, @io.pid)
      @io.close
    rescue SystemCallError, IOError
      nil
    end
  end

  HELLO_PATIENCE = 2.0

  # true once hello came, false when the connection closed or deadline passed
  def read_hello(s, deadline)
    buf = +""
    until buf.include?("\r\n\r\n") && buf.end_with?("hello")
      return false if (left = deadline - now) <= 0 || !s.wait_readable(left)

      chunk = s.read_nonblock(4096, exception: false)
      return false if chunk.nil?

      buf << chunk if chunk.is_a?(String)
    end
    true
  end

  # user + system CPU seconds of a process, all its threads
  def cpu_seconds(pid) = File.read("/proc/#{pid}/stat").split(") ").last.split.values_at(11, 12).sum(&:to_f) / Etc.sysconf(Etc::SC_CLK_TCK)

  def rss_kib(pid) = File.read("/proc/#{pid}/status")[/^VmRSS:\s+(\d+)/, 1].to_i
end

if $PROGRAM_NAME == __FILE__
  o = { clients: 300, every: 0.5, events: 3, threads: 3, servers: %w[oribi puma], oribi_args: [], window: nil, env: {}, app: "each" }
  OptionParser.new do |p|
    p.on("--clients N", Integer) { |v| o[:clients] = v }
    p.on("--every SEC", Float) { |v| o[:every] = v }
    p.on("--events N", Integer) { |v| o[:events] = v }
    p.on("--threads N", Integer) { |v| o[:threads] = v }
    p.on("--servers LIST", Array) { |v| o[:servers] = v }
    p.on("--app each|broadcast", %w[each broadcast],
         "a body per stream that sleeps (each), or one thread writing every hijacked stream") { |v| o[:app] = v }
    p.on("--window SEC", Float, "how long events are counted, once every stream is open") { |v| o[:window] = v }
    p.on("--oribi-args ARGS", "more options for oribi") { |v| o[:oribi_args] = Shellwords.split(v) }
    p.on("--env NAME=VALUE", "in every server's environment (RUBY_GC_HEAP_FREE_SLOTS=…); repeatable") do |v|
      o[:env].store(*v.split("=", 2))
    end
  end.parse!
  o[:window] ||= o[:events] * o[:every] + 1
  puts format("%-8s %14s %12s %12s %10s %10s %10s %7s %11s %12s %6s", "server", "fed #{o[:events]} events", "late p50",
              "late p99", "hello p50", "p99", "max", "hellos", "unanswered", "KiB/stream", "CPU")
  o[:servers].each do |server|
    r = Streams.run(server, o)
    ms = ->(v) { v ? format("%.1f ms", v * 1000) : "-" }
    puts format("%-8s %14s %12s %12s %10s %10s %10s %7d %11d %12.1f %5.0f%%", server, "#{r[:fed]}/#{o[:clients]}", ms.(r[:late50]),
                ms.(r[:late99]), ms.(r[:p50]), ms.(r[:p99]), ms.(r[:max]), r[:hellos], r[:unanswered], r[:kib], r[:cpu] * 100)
  end
end
