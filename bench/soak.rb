# frozen_string_literal: true

# Soak: runs an Oribi server (bench/apps/soak.ru) under mixed load for a while and
# watches its workers for memory growth and fd leaks.
#
# Load, paced to --rate requests per second in all: keep-alive clients
# (GETs, POST bodies from empty to spilled-to-tmpfile sizes, chunked
# POSTs, 500s from the app), connection-per-request clients, malformed
# requests (each must get its 4xx and a close), and clients that abort in
# the middle of a body.
#
# Every --interval seconds each worker's RSS (/proc/PID/status VmRSS) and
# open fds (/proc/PID/fd) are sampled. The report gives the samples at
# start, at the end of the warm-up and at the end. Exit status 1 when a
# worker's RSS grew by more than --max-rss-growth MiB after the warm-up,
# when a worker's fd count does not come back to its idle baseline once the
# clients are gone, when a worker was replaced (it died), or when any
# request got an unexpected answer.
#
#   ruby bench/soak.rb --duration 1800 --warmup 120          # the 30-minute run
#   ruby bench/soak.rb --duration 60 --warmup 15             # what CI runs
require "fileutils"
require "optparse"
require "socket"
require "tmpdir"
require "rbconfig"
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../oribi-bench/lib", __dir__))
require "oribi/process_group"

module Soak
  ROOT = File.expand_path("..", __dir__)

  BAD = [
    "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "GET / HTTP/1.1\nHost: a\n\n",
    "GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\nhello",
    "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
    "GET / HTTP/1.11\r\nHost: a\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
    "GET /#{'a' * 9000} HTTP/1.1\r\nHost: a\r\n\r\n",
  ].freeze

  # [bytes, chunked?]: empty, small, medium, past body_buffer (a tmpfile)
  BODIES = [[0, false], [100, false], [8_000, false], [200_000, false], [50_000, true], [300_000, true]].freeze

  class Stats
    attr_reader :done, :failures

    def initialize
      @lock = Mutex.new
      @done = 0
      @failures = []
    end

    def ok = @lock.synchronize { @done += 1 }

    def fail(what)
      @lock.synchronize do
        @done += 1
        @failures << what if @failures.size < 20
        @failed = (@failed || 0) + 1
      end
    end

    def failed = @lock.synchronize { @failed || 0 }
  end

  # A response off a raw socket: [status, headers, body] or nil on EOF.
  def self.read_response(sock)
    head = +""
    until head.end_with?("\r\n\r\n")
      c = sock.read(1) or return nil
      head << c
    end
    status = head[/\AHTTP\/1\.1 (\d{3})/, 1].to_i
    headers = head.lines.drop(1).to_h { |l| k, v = l.split(":", 2); [k.downcase, v.to_s.strip] }
    body = +""
    if (n = headers["content-length"])
      body = sock.read(n.to_i).to_s
    elsif headers["transfer-encoding"]
      while (size = sock.gets("\r\n").to_s.to_i(16)).positive?
        body << sock.read(size).to_s
        sock.read(2)
      end
      sock.read(2)
    end
    [status, headers, body]
  end

  class Client
    def initialize(server, stats, rng)
      @server = server
      @stats = stats
      @rng = rng
    end

    def connect = @rng.rand < 0.5 ? TCPSocket.new("127.0.0.1", @server.port) : UNIXSocket.new(@server.sock)

    def expect(label, res, status)
      if res && res[0] == status
        @stats.ok
      else
        @stats.fail("#{label}: got #{res ? res[0] : 'EOF'}, expected #{status}")
      end
      res
    end

    # One operation of the mix; keeps a keep-alive connection in @ka.
    def step
      case @rng.rand(100)
      when 0...45 then keepalive_op
      when 45...65 then close_op
      when 65...80 then post_op
      when 80...88 then error_op
      when 88...95 then bad_op
      else abort_op
      end
    rescue SystemCallError, IOError => e
      @ka&.close
      @ka = nil
      @stats.fail("#{e.class}: #{e.message}")
    end

    def keepalive_op
      @ka ||= connect
      @ka.write("GET /ka HTTP/1.1\r\nHost: soak\r\n\r\n")
      res = expect("keep-alive GET", Soak.read_response(@ka), 200)
      if !res || @rng.rand < 0.02 # now and then the client goes away
        @ka.close
        @ka = nil
      end
    end

    def close_op
      s = connect
      s.write("GET /close HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n")
      expect("close GET", Soak.read_response(s), 200)
      s.close
    end

    def post_op
      size, chunked = BODIES[@rng.rand(BODIES.size)]
      body = "x" * size
      @ka ||= connect
      if chunked
        @ka.write("POST /post HTTP/1.1\r\nHost: soak\r\nTransfer-Encoding: chunked\r\n\r\n")
        body.each_char.each_slice(16_384) { |part| @ka.write("#{part.size.to_s(16)}\r\n#{part.join}\r\n") }
        @ka.write("0\r\n\r\n")
      else
        @ka.write("POST /post HTTP/1.1\r\nHost: soak\r\nContent-Length: #{size}\r\n\r\n#{body}")
      end
      res = expect("POST #{size}#{' chunked' if chunked}", Soak.read_response(@ka), 200)
      @stats.fail("POST #{size}: app read #{res[2].to_i} bytes") if res && res[2].to_i != size
    end

    def error_op
      @ka ||= connect
      @ka.write("GET /error HTTP/1.1\r\nHost: soak\r\n\r\n")
      expect("app error", Soak.read_response(@ka), 500)
    end

    def bad_op
      s = connect
      req = BAD[@rng.rand(BAD.size)]
      s.write(req)
      res = Soak.read_response(s)
      if res && res[0].between?(400, 505) && res[1]["connection"] == "close"
        @stats.ok
      else
        @stats.fail("malformed #{req[0, 30].inspect}: got #{res ? res[0] : 'EOF'}")
      end
      s.close
    end

    def abort_op
      s = connect
      s.write("POST /post HTTP/1.1\r\nHost: soak\r\nContent-Length: 300000\r\n\r\n")
      s.write("y" * @rng.rand(1..200_000))
      s.close
      @stats.ok
    end

    def close = @ka&.close
  end

  # The server under test, an Oribi::ProcessGroup.
  class Server
    # Ruby collects when the memory malloc'ed since the last GC passes a
    # limit that grows with use, to 32 MiB (minor) and 128 MiB (major) by
    # default. Request bodies and the app's reads are such memory: garbage
    # awaiting a GC, and the heap fragments it leaves, counted as growth
    # here (a loaded run grew 22 -> 82 MiB in 120 s with ~70k live objects
    # throughout). Held low, RSS growth after the warm-up is what stays.
    GC_LIMITS = {
      "RUBY_GC_MALLOC_LIMIT" => (4 << 20).to_s, "RUBY_GC_MALLOC_LIMIT_MAX" => (4 << 20).to_s,
      "RUBY_GC_OLDMALLOC_LIMIT" => (16 << 20).to_s, "RUBY_GC_OLDMALLOC_LIMIT_MAX" => (16 << 20).to_s
    }.freeze

    attr_reader :port, :sock, :dir

    def initialize(workers)
      @dir = Dir.mktmpdir("oribi-soak")
      @sock = File.join(@dir, "s.sock")
      @port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
      cmd = [RbConfig.ruby, File.join(ROOT, "exe/oribi"), "-w", workers.to_s, "-E", "production",
             "-b", "tcp://127.0.0.1:#{@port}", "-b", "unix://#{@sock}", "--max-body", "4000000",
             File.join(ROOT, "bench/apps/soak.ru")]
      @group = Oribi::ProcessGroup.new(cmd, env: GC_LIMITS, log: File.join(@dir, "server.log"))
      deadline = Time.now + 30
      begin
        TCPSocket.new("127.0.0.1", @port).close
      rescue Errno::ECONNREFUSED
        raise "server did not start:\n#{@group.log}" if Time.now > deadline

        sleep 0.05
        retry
      end
      # Booted, not just forked: a booting worker has yet to open its
      # engine's fds, and the idle sample is the baseline for fd growth.
      until workers.zero? || (worker_pids.size == workers && worker_pids.none? { |pid| booting?(pid) })
        raise "workers did not boot in 30 s:\n#{@group.log}" if Time.now > deadline

        sleep 0.05
      end
    end

    # The process title a worker keeps until its engine serves (worker.rb)
    def booting?(pid)
      !File.read("/proc/#{pid}/cmdline").include?("served=")
    rescue SystemCallError
      true
    end

    def pid = @group.pid
    def worker_pids = @group.worker_pids
    def log_tail(n) = @group.tail(n).join

    def stop
      @group.stop
    ensure
      FileUtils.rm_rf(@dir)
    end
  end

  Sample = Struct.new(:t, :rss, :fds) # rss in KiB and fds, per worker pid

  def self.sample(pids, t)
    rss = {}
    fds = {}
    pids.each do |pid|
      rss[pid] = File.read("/proc/#{pid}/status")[/^VmRSS:\s+(\d+)/, 1].to_i
      fds[pid] = Dir.children("/proc/#{pid}/fd").size
    rescue SystemCallError
      rss[pid] = fds[pid] = nil
    end
    Sample.new(t, rss, fds)
  end

  def self.fmt(s) = s.rss.keys.map { |p| format("%d: %.1f MiB %d fds", p, s.rss[p].to_i / 1024.0, s.fds[p].to_i) }.join(", ")

  def self.run(argv)
    o = { duration: 60.0, warmup: 15.0, rate: 200.0, clients: 8, workers: 2, interval: 5.0, max_rss_growth: 16.0 }
    OptionParser.new do |p|
      p.banner = "Usage: ruby bench/soak.rb [options]"
      p.on("--duration SEC", Float, "length of the load (default 60)") { |v| o[:duration] = v }
      p.on("--warmup SEC", Float, "growth is counted from here (default 15)") { |v| o[:warmup] = v }
      p.on("--rate N", Float, "operations per second in all (default 200)") { |v| o[:rate] = v }
      p.on("--clients N", Integer, "client threads (default 8)") { |v| o[:clients] = v }
      p.on("--workers N", Integer, "server workers (default 2)") { |v| o[:workers] = v }
      p.on("--interval SEC", Float, "sampling period (default 5)") { |v| o[:interval] = v }
      p.on("--max-rss-growth MIB", Float, "allowed RSS growth per worker after warm-up (default 16)") { |v| o[:max_rss_growth] = v }
      p.on("--samples FILE", "also write every sample to FILE (CSV)") { |v| o[:csv] = v }
    end.parse!(argv)

    server = Server.new(o[:workers])
    pids = server.worker_pids
    idle = sample(pids, 0.0)
    $stderr.puts "soak: server #{server.pid}, workers #{pids.join(' ')}; #{o[:duration]} s at #{o[:rate]}/s, warm-up #{o[:warmup]} s"
    $stderr.puts "  idle:    #{fmt(idle)}"
    stats = Stats.new
    start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    stop_at = start + o[:duration]
    per_client = o[:rate] / o[:clients]
    threads = Array.new(o[:clients]) do |i|
      Thread.new do
        client = Client.new(server, stats, Random.new(i + 1))
        n = 0
        while (now = Process.clock_gettime(Process::CLOCK_MONOTONIC)) < stop_at
          due = start + n / per_client
          sleep(due - now) if due > now
          client.step
          n += 1
        end
        client.close
      end
    end

    samples = [sample(pids, 0.0)]
    warm = nil
    until threads.none?(&:alive?)
      sleep [o[:interval], stop_at - Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.01].min.clamp(0.05, o[:interval])
      t = Process.clock_gettime(Process::CLOCK_MONOTONIC) - start
      s = sample(pids, t)
      samples << s
      warm ||= s if t >= o[:warmup]
      $stderr.print format("\r  %5.0f/%.0f s  %d done (%.0f/s)  %d failed  %s   ", t, o[:duration], stats.done,
                           stats.done / [t, 0.001].max, stats.failed, fmt(s))
    end
    threads.each(&:join)
    $stderr.puts
    warm ||= samples.last
    last = samples.last

    # Clients are gone: each worker's fds must come back to the idle count
    # (lingering closes and keep-alive timers may take a moment).
    settle = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    settled = sample(pids, last.t)
    until pids.all? { |p| settled.fds[p].to_i <= idle.fds[p] } || Process.clock_gettime(Process::CLOCK_MONOTONIC) > settle
      sleep 0.1
      settled = sample(pids, last.t)
    end
    replaced = server.worker_pids != pids

    if o[:csv]
      File.open(o[:csv], "w") do |f|
        f.puts "t,pid,rss_kib,fds"
        samples.each { |s| s.rss.each_key { |p| f.puts [s.t.round(1), p, s.rss[p], s.fds[p]].join(",") } }
      end
    end

    problems = []
    problems << "a worker was replaced (#{pids.join(' ')} -> #{server.worker_pids.join(' ')})" if replaced
    pids.each do |p|
      growth = (last.rss[p].to_i - warm.rss[p].to_i) / 1024.0
      problems << format("worker %d RSS grew %.1f MiB after warm-up (bound %.1f)", p, growth, o[:max_rss_growth]) if growth > o[:max_rss_growth]
      problems << "worker #{p} holds #{settled.fds[p]} fds once idle, #{idle.fds[p]} before the load" if settled.fds[p].to_i > idle.fds[p]
    end
    problems << "#{stats.failed} unexpected answers, e.g. #{stats.failures.first(5).join('; ')}" if stats.failed.positive?

    puts "soak: #{stats.done} operations in #{o[:duration].round} s (#{(stats.done / o[:duration]).round}/s), #{stats.failed} unexpected"
    puts "  start (idle):                 #{fmt(idle)}"
    puts format("  after warm-up (%5.0f s):      %s", warm.t, fmt(warm))
    puts format("  end (%5.0f s):                %s", last.t, fmt(last))
    puts "  idle again:                   #{fmt(settled)}"
    pids.each do |p|
      puts format("  worker %d: RSS %+.1f MiB since warm-up (max %.1f MiB), fds %d idle before, %d after",
                  p, (last.rss[p].to_i - warm.rss[p].to_i) / 1024.0, samples.map { |s| s.rss[p].to_i }.max / 1024.0,
                  idle.fds[p], settled.fds[p].to_i)
    end
    if problems.empty?
      puts "soak: OK"
      0
    else
      problems.each { |m| puts "soak: FAIL #{m}" }
      puts "soak: the server's log, last 40 lines:", server.log_tail(40)
      1
    end
  ensure
    server&.stop
  end
end

exit Soak.run(ARGV) if $PROGRAM_NAME == __FILE__
