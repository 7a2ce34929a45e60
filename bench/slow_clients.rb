# frozen_string_literal: true

# Slow clients against one worker: TRICKLE connections send their head (half
# of them) or their body (the other half) one byte at a time, IDLE
# keep-alive connections sit between requests, and meanwhile a normal
# client sends GETs at a fixed rate (Oribi::Loadgen, open loop). Reports the
# normal client's latency percentiles and success, and when and how each
# trickling connection was cut (408 expected at header_timeout /
# body_timeout).
#
# One Ruby thread drives every trickling socket (IO.select and
# write_nonblock), so the client side costs little CPU; Loadgen runs in C
# without the GVL alongside it.
#
#   ruby -Ilib bench/slow_clients.rb                    # 500 + 500, 100 req/s, timeouts 5 s
#   ruby -Ilib bench/slow_clients.rb --trickle 2000 --idle 2000 --rate 500 --duration 10
require "optparse"
require "socket"
require "tmpdir"
require "fileutils"
require "rbconfig"
require "oribi/loadgen"

module SlowClients
  # What a server has said on sock: its status (an Integer), nil when it
  # closed or reset it without one, :wait_readable while nothing came.
  def self.answer(sock)
    data = sock.read_nonblock(4096, exception: false)
    return data if data == :wait_readable

    data && data[%r{\AHTTP/1\.1 (\d{3})}, 1]&.to_i
  rescue SystemCallError
    nil
  end

  ROOT = File.expand_path("..", __dir__)
  HEADER_HEAD = "GET /slow HTTP/1.1\r\nHost: a\r\nX-Slow: "
  BODY_HEAD = "POST /slow HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n"
  GET = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"

  Trickler = Struct.new(:sock, :kind, :started, :status, :answered_at, :error)

  # Opens n keep-alive connections, each served one request, left idle.
  def self.open_idle(connect, n)
    socks = Array.new(n) { connect.call }
    socks.each { |s| s.write(GET) }
    statuses = read_statuses(socks, 10)
    bad = statuses.count { |st| st != 200 }
    raise "#{bad} of #{n} idle connections were not served" if bad.positive?

    socks
  end

  # The status of one response per socket (nil when none came in time);
  # reads whole responses only as far as the status line and the rest of
  # what arrived, which for these tiny responses is all of them.
  def self.read_statuses(socks, timeout)
    statuses = Array.new(socks.size)
    bufs = Array.new(socks.size) { +"" }
    left = socks.each_index.to_a
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    until left.empty?
      wait = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
      break if wait <= 0

      ready, = IO.select(left.map { |i| socks[i] }, nil, nil, wait)
      next unless ready

      ready.each do |s|
        i = socks.index(s)
        chunk = s.read_nonblock(4096, exception: false)
        next if chunk == :wait_readable

        bufs[i] << chunk.to_s
        if chunk.nil? || bufs[i].include?("\r\n\r\n")
          statuses[i] = bufs[i][/\AHTTP\/1\.1 (\d{3})/, 1]&.to_i
          left.delete(i)
        end
      end
    end
    statuses
  end

  # Opens the trickling connections and returns them; drive them with #trickle.
  def self.open_tricklers(connect, n)
    Array.new(n) do |i|
      kind = i.even? ? :header : :body
      s = connect.call
      s.write(kind == :header ? HEADER_HEAD : BODY_HEAD)
      Trickler.new(s, kind, Process.clock_gettime(Process::CLOCK_MONOTONIC))
    end
  end

  # One byte per socket every tick until each got an answer or EOF, or until
  # deadline (seconds from now).
  def self.trickle(tricklers, deadline:, tick: 0.1)
    stop_at = Process.clock_gettime(Process::CLOCK_MONOTONIC) + deadline
    open = tricklers.dup
    by_sock = tricklers.to_h { |t| [t.sock, t] }
    next_tick = 0.0
    until open.empty?
      now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      break if now > stop_at

      if now >= next_tick
        open.each do |t|
          t.sock.write_nonblock("a", exception: false)
        rescue SystemCallError, IOError => e
          t.error ||= e.class.name # the server hung up: its answer is read below
        end
        next_tick = now + tick
      end
      ready, = IO.select(open.map(&:sock), nil, nil, [next_tick - now, 0.001].max)
      (ready || []).each do |s|
        t = by_sock[s]
        status = answer(s)
        next if status == :wait_readable

        t.status = status
        t.answered_at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        open.delete(t)
        s.close
      end
    end
    open.each { |t| t.sock.close }
    tricklers
  end

  # The whole scenario against a running server; returns a Hash.
  def self.run(target, trickle:, idle:, rate:, duration:, timeout:)
    connect = target[:unix_path] ? -> { UNIXSocket.new(target[:unix_path]) } : -> { TCPSocket.new(target[:host], target[:port]) }
    idle_socks = open_idle(connect, idle)
    tricklers = open_tricklers(connect, trickle)
    driver = Thread.new { trickle(tricklers, deadline: timeout + 10) }
    load = Oribi::Loadgen.run(target.merge(request: GET, rate: rate, duration: duration, threads: 1,
                                           max_connections: 100, timeout: 5))
    driver.join
    idle_after = read_statuses(idle_socks.each { |s| s.write(GET) }, 10)
    idle_socks.each(&:close)
    { load: load, tricklers: tricklers, idle_ok: idle_after.count(200), idle: idle }
  end

  def self.report(r, timeout)
    load = r[:load]
    lat = load[:latency]
    ms = ->(us) { us ? format("%.1f ms", us / 1000.0) : "-" }
    out = +""
    out << format("normal client: %d requests, %d errors, status %s, p50 %s p90 %s p99 %s max %s, late %d\n",
                  load[:requests], load[:errors].values.sum, load[:status].inspect,
                  ms[lat[:p50]], ms[lat[:p90]], ms[lat[:p99]], ms[lat[:max]], load[:late].to_i)
    %i[header body].each do |kind|
      ts = r[:tricklers].select { |t| t.kind == kind }
      cut = ts.filter_map { |t| t.answered_at - t.started if t.answered_at }
      out << format("%s tricklers: %d, statuses %s, cut after %.2f..%.2f s (timeout %.1f s)\n",
                    kind, ts.size, ts.map(&:status).tally.inspect, cut.min || 0, cut.max || 0, timeout)
    end
    out << "idle keep-alive: #{r[:idle_ok]} of #{r[:idle]} still served afterwards\n"
  end

  def self.main(argv)
    o = { trickle: 500, idle: 500, rate: 100.0, duration: 4.0, timeout: 5.0 }
    OptionParser.new do |p|
      p.banner = "Usage: ruby -Ilib bench/slow_clients.rb [options]"
      p.on("--trickle N", Integer, "connections sending a byte at a time (default 500)") { |v| o[:trickle] = v }
      p.on("--idle N", Integer, "idle keep-alive connections (default 500)") { |v| o[:idle] = v }
      p.on("--rate N", Float, "the normal client's requests per second (default 100)") { |v| o[:rate] = v }
      p.on("--duration SEC", Float, "the normal client's run (default 4)") { |v| o[:duration] = v }
      p.on("--timeout SEC", Float, "the server's header and body timeouts (default 5)") { |v| o[:timeout] = v }
    end.parse!(argv)
    # client side: one fd per connection; server side: body tricklers also
    # hold a tmpfile (their declared body is over body_buffer)
    need = o[:trickle] + o[:idle] + 300
    server_fds = need + o[:trickle]
    hard = Process.getrlimit(:NOFILE)[1]
    Process.setrlimit(:NOFILE, [need, hard].min, hard)

    dir = Dir.mktmpdir("oribi-slow")
    port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
    pid = Process.spawn(RbConfig.ruby, File.join(ROOT, "exe/oribi"), "-w", "1", "-E", "production",
                        "-b", "tcp://127.0.0.1:#{port}", "--max-connections", need.to_s,
                        "--header-timeout", o[:timeout].to_s, "--body-timeout", o[:timeout].to_s,
                        "--keepalive-timeout", "600", File.join(ROOT, "bench/apps/hello.ru"),
                        %i[out err] => File.join(dir, "log"), pgroup: true, rlimit_nofile: [[server_fds, hard].min, hard])
    begin
      TCPSocket.new("127.0.0.1", port).close
    rescue Errno::ECONNREFUSED
      sleep 0.05
      retry
    end
    r = run({ host: "127.0.0.1", port: port }, **o)
    puts report(r, o[:timeout])
    0
  ensure
    if pid
      Process.kill(:TERM, pid)
      Process.wait(pid)
    end
    FileUtils.rm_rf(dir) if dir
  end
end

exit SlowClients.main(ARGV) if $PROGRAM_NAME == __FILE__
