# frozen_string_literal: true

# Connection exhaustion: ATTACKERS connections that take a slot and never
# send a request (one byte over TCP, which TCP_DEFER_ACCEPT needs to pass
# them on; nothing over unix), then one normal client: how long until it has
# its 200 (connect included), and how many attackers were closed by then.
# Each transport gets a fresh server. With --peer, nginx runs the same
# scenario in the same run (worker_connections = --max-connections, or 1024)
# and the report gives Oribi's wait over nginx's.
#
#   ruby -Ilib bench/exhaustion.rb                                 # 2000 attackers, 1 worker, default max_connections
#   ruby -Ilib bench/exhaustion.rb --max-connections 64 --peer
require "optparse"
require "socket"
require "tmpdir"
require "fileutils"
require "rbconfig"
require "etc"

module Exhaustion
  ROOT = File.expand_path("..", __dir__)
  GET = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"

  def self.now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # A socket whose connect has begun: [sock, :connected | :pending], or nil
  # when a unix listener's queue is full (EAGAIN).
  def self.start_connect(addr)
    s = Socket.new(addr.afamily, :STREAM)
    r = s.connect_nonblock(addr, exception: false)
    [s, r == :wait_writable ? :pending : :connected]
  rescue Errno::EAGAIN, Errno::ECONNREFUSED
    s&.close
    nil
  end

  # Opens n attackers; returns [socks, refused]. Pending TCP connects get
  # a second to complete, then their byte.
  def self.attack(addr, n, tcp)
    started = Array.new(n) { start_connect(addr) }
    socks = started.compact.map(&:first)
    pending = started.compact.select { |_, st| st == :pending }.map(&:first)
    deadline = now + 1
    until pending.empty? || now > deadline
      _, w, = IO.select(nil, pending, nil, [deadline - now, 0].max)
      pending -= w || []
    end
    socks.each { |s| s.write_nonblock("G", exception: false) } if tcp
    [socks, started.count(nil)]
  end

  # [outcome, seconds] from connect to the status line (or to the end):
  # outcome :ok (a 200), :status (another), :closed or :timeout.
  def self.client_wait(addr, timeout)
    t0 = now
    deadline = t0 + timeout
    s = connect(addr, deadline) or return [:timeout, now - t0]
    s.write(GET)
    buf = +""
    until buf.include?("\r\n")
      left = deadline - now
      return [:timeout, now - t0] if left <= 0 || !s.wait_readable(left)

      chunk = s.read_nonblock(4096, exception: false)
      return [:closed, now - t0] if chunk.nil?

      buf << chunk if chunk.is_a?(String)
    end
    [buf.start_with?("HTTP/1.1 200") ? :ok : :status, now - t0]
  rescue SystemCallError
    [:closed, now - t0]
  ensure
    s&.close
  end

  # A connected socket, or nil at the deadline: a full unix queue says
  # EAGAIN at once, so that is tried again (a blocking connect would wait).
  def self.connect(addr, deadline)
    loop do
      s, st = start_connect(addr)
      return s if st == :connected

      if st == :pending # TCP: the handshake (SYNs are retried while the queue is full)
        return s if IO.select(nil, [s], nil, [deadline - now, 0].max) && s.getsockopt(:SOCKET, :ERROR).int.zero?

        s.close
        return nil
      end
      return nil if now > deadline

      IO.select(nil, nil, nil, 0.01) # polling a full unix queue, bounded by the deadline
    end
  end

  # Answered (408) or closed: readable at all.
  def self.cut?(sock)
    !sock.wait_readable(0).nil?
  rescue SystemCallError
    true
  end

  def self.scenario(addr, o)
    socks, refused = attack(addr, o[:attackers], addr.afamily == Socket::AF_INET)
    outcome, wait = client_wait(addr, o[:timeout])
    { outcome: outcome, wait: wait, refused: refused, cut: socks.count { |s| cut?(s) }, open: socks.size }
  ensure
    socks&.each(&:close)
  end

  # [pid, address] of a server of the kind on the transport, once it answers
  def self.start(kind, transport, dir, o)
    port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
    sock = File.join(dir, "#{kind}.sock")
    addr = transport == :tcp ? Addrinfo.tcp("127.0.0.1", port) : Addrinfo.unix(sock)
    pid = kind == :oribi ? spawn_oribi(transport, port, sock, dir, o) : spawn_nginx(transport, port, sock, dir, o)
    deadline = now + 20
    until client_wait(addr, 1).first == :ok
      raise "#{kind} did not start" if now > deadline
    end
    [pid, addr]
  end

  def self.spawn_oribi(transport, port, sock, dir, o)
    bind = transport == :tcp ? "tcp://127.0.0.1:#{port}" : "unix://#{sock}"
    args = ["-w", o[:workers].to_s, "-E", "production", "-b", bind, "--header-timeout", o[:header_timeout].to_s]
    args += ["--max-connections", o[:max_connections].to_s] if o[:max_connections]
    Process.spawn(RbConfig.ruby, File.join(ROOT, "exe/oribi"), *args, File.join(ROOT, "bench/apps/hello.ru"),
                  %i[out err] => File.join(dir, "oribi.log"), pgroup: true, rlimit_nofile: o[:nofile])
  end

  def self.spawn_nginx(transport, port, sock, dir, o)
    listen = transport == :tcp ? "127.0.0.1:#{port} deferred" : "unix:#{sock}"
    user = Process.uid.zero? ? "user #{Etc.getpwuid(0).name};" : ""
    temp = %w[client_body proxy fastcgi uwsgi scgi].map { |t| "#{t}_temp_path #{dir}/#{t};" }.join(" ")
    File.write(File.join(dir, "nginx.conf"), <<~CONF)
      #{user} worker_processes #{o[:workers]}; pid #{dir}/nginx.pid; error_log #{dir}/error.log;
      worker_rlimit_nofile #{o[:nofile]};
      events { worker_connections #{o[:max_connections] || 1024}; }
      http { access_log off; #{temp} client_header_timeout #{o[:header_timeout]}s;
        server { listen #{listen}; location / { return 200 "ok\\n"; } } }
    CONF
    Process.spawn("nginx", "-p", dir, "-c", File.join(dir, "nginx.conf"), "-g", "daemon off;",
                  %i[out err] => File.join(dir, "nginx.out"), pgroup: true)
  end

  def self.stop(pid)
    Process.kill(:KILL, -pid)
    Process.wait(pid)
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  end

  def self.main(argv)
    o = { attackers: 2000, workers: 1, max_connections: nil, header_timeout: 30, timeout: 40, peer: false }
    OptionParser.new do |p|
      p.banner = "Usage: ruby -Ilib bench/exhaustion.rb [options]"
      p.on("--attackers N", Integer, "connections holding a slot (default 2000)") { |v| o[:attackers] = v }
      p.on("--workers N", Integer, "worker processes (default 1)") { |v| o[:workers] = v }
      p.on("--max-connections N", Integer, "per worker (default: the server's, 1024)") { |v| o[:max_connections] = v }
      p.on("--header-timeout SEC", Integer, "the server's (default 30)") { |v| o[:header_timeout] = v }
      p.on("--timeout SEC", Float, "how long the normal client waits at most (default 40)") { |v| o[:timeout] = v }
      p.on("--peer", "the same against nginx (worker_connections = max connections)") { o[:peer] = true }
    end.parse!(argv)
    hard = Process.getrlimit(:NOFILE)[1]
    o[:nofile] = [o[:attackers] + 1000, hard].min
    Process.setrlimit(:NOFILE, o[:nofile], hard)

    kinds = o[:peer] ? %i[oribi nginx] : %i[oribi]
    puts format("%d attackers, %d worker(s), max connections %s, header timeout %d s",
                o[:attackers], o[:workers], o[:max_connections] || "default", o[:header_timeout])
    %i[tcp unix].each do |transport|
      waits = kinds.to_h do |kind|
        dir = Dir.mktmpdir("oribi-exhaustion")
        pid, addr = start(kind, transport, dir, o)
        r = scenario(addr, o)
        outcome = { ok: "200", status: "not a 200", closed: "closed", timeout: "nothing" }[r[:outcome]]
        puts format("%-5s %-5s normal client: %s after %.3f s; attackers: %d connected, %d answered or closed by " \
                    "then, %d refused at connect", transport, kind, outcome, r[:wait], r[:open], r[:cut], r[:refused])
        [kind, r[:outcome] == :ok && r[:wait]]
      ensure
        stop(pid) if pid
        FileUtils.rm_rf(dir) if dir
      end
      next unless o[:peer] && waits.values.all?

      puts format("%-5s oribi / nginx wait: %.1f", transport, waits[:oribi] / waits[:nginx])
    end
    0
  end
end

exit Exhaustion.main(ARGV) if $PROGRAM_NAME == __FILE__
