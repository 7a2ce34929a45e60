# frozen_string_literal: true

# What an idle kept-alive connection costs a worker, whatever its last
# request and response were: N connections (half TCP, half unix), each
# sending the largest head the server accepts (a request line of 8 KiB and
# 64 KiB of header fields) for an 8 MiB response, read whole, then left
# open and idle. Printed per checkout: the worker's RSS before and after
# (each read after a GC and glibc's malloc_trim, so that it is memory held,
# not kept for reuse) and the KiB per idle connection. One worker, one
# app thread; the checkouts are run one after the other, alike.
#
#   bundle exec ruby bench/idle_memory.rb [--connections 1000] [--mib 8] [--root DIR]...
require "optparse"
require "rbconfig"
require "socket"
require "tmpdir"
require_relative "../test/support/wait"
require_relative "../oribi-bench/lib/oribi/process_group"

module IdleMemory
  APP = <<~RUBY
    require "fiddle"
    TRIM = Fiddle::Function.new(Fiddle.dlopen(nil)["malloc_trim"], [Fiddle::TYPE_SIZE_T], Fiddle::TYPE_INT)
    BODY = ("y" * (Integer(ENV.fetch("BODY_MIB")) << 20)).freeze
    run lambda { |env|
      next [200, {}, ["ok"]].tap { GC.start; TRIM.call(0) } if env["PATH_INFO"] == "/gc"
      [200, { "content-type" => "application/octet-stream" }, [BODY]]
    }
  RUBY

  module_function

  def run(root, connections, mib)
    dir = Dir.mktmpdir("oribi-idle")
    app = File.join(dir, "app.ru")
    File.write(app, APP)
    sock = File.join(dir, "s.sock")
    port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
    log = File.join(dir, "log")
    server = Oribi::ProcessGroup.new([RbConfig.ruby, File.join(root, "exe/oribi"), "-w", "1", "-t", "1",
                                      "-b", "tcp://127.0.0.1:#{port}", "-b", "unix://#{sock}", app],
                                     log: log, env: { "BODY_MIB" => mib.to_s }, rlimit_nofile: connections + 256)
    open = [-> { TCPSocket.new("127.0.0.1", port) }, -> { UNIXSocket.new(sock) }]
    wait_until(timeout: 60) { File.socket?(sock) && (open[0].call.close || true) rescue false } or abort(File.read(log)) # rubocop:disable Style/RescueModifier
    worker = wait_until { server.worker_pids.first } or abort(File.read(log))
    rss = lambda do
      s = open[0].call
      s.write("GET /gc HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
      s.read
      s.close
      File.read("/proc/#{worker}/status")[/^VmRSS:\s+(\d+)/, 1].to_i
    end
    head = "GET /#{'p' * 8000} HTTP/1.1\r\nHost: t\r\n#{Array.new(15) { |i| "X-F#{i}: #{'h' * 4300}\r\n" }.join}\r\n"
    before = rss.call
    clients = Array.new(connections) do |i|
      s = open[i % 2].call
      s.write(head)
      read_response(s)
      $stderr.print "\r#{File.basename(root)}: #{i + 1}/#{connections} connections idle" if ((i + 1) % 50).zero?
      s
    end
    $stderr.puts
    after = rss.call
    clients.each(&:close)
    [before, after, (after - before).fdiv(connections)]
  ensure
    server&.stop
    FileUtils.rm_rf(dir) if dir
  end

  # The head, then content-length bytes, discarded
  def read_response(s)
    head = +""
    head << s.readpartial(65_536) until head.include?("\r\n\r\n")
    h, rest = head.split("\r\n\r\n", 2)
    left = h[/content-length: (\d+)/i, 1].to_i - rest.bytesize
    left -= s.readpartial([left, 1 << 20].min).bytesize while left.positive?
  end
end

if $PROGRAM_NAME == __FILE__
  require "fileutils"
  roots = []
  connections = 1000
  mib = 8
  OptionParser.new do |o|
    o.on("--connections N", Integer) { |v| connections = v }
    o.on("--mib N", Integer, "response size") { |v| mib = v }
    o.on("--root DIR", "a checkout with its extension built (repeatable; default: this one)") { |v| roots << v }
  end.parse!
  roots << File.expand_path("..", __dir__) if roots.empty?
  puts format("%-40s %12s %12s %16s", "checkout", "RSS before", "RSS idle", "KiB per idle conn")
  roots.each do |root|
    before, after, per = IdleMemory.run(root, connections, mib)
    puts format("%-40s %9d KiB %9d KiB %16.1f", root, before, after, per)
  end
end
