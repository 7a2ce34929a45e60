# frozen_string_literal: true

# What one slow download of a big file costs a worker's memory, by how the
# app hands the file over: a body whose to_path is a Pathname (Rails'
# `send_file Rails.root.join(...)`), a String path, or only `each`. The
# client reads about 1 MB/s for a few seconds; the worker's RSS peak over
# its RSS before is printed with the response's framing.
#
#   bundle exec ruby bench/file_body_rss.rb [--mb 50] [--seconds 3]
require "optparse"
require "socket"
require "tmpdir"
require "rbconfig"

module FileBodyRss
  ROOT = File.expand_path("..", __dir__)

  APP = <<~RUBY
    require "pathname"
    FILE = ENV.fetch("BIG_FILE")
    # to_path as the given kind, and each as the fallback a server may take
    Body = Struct.new(:path) do
      def to_path = path
      def each = File.open(FILE, "rb") { |f| while (c = f.read(65_536)); yield c; end }
    end
    EachOnly = Struct.new(:path) do
      def each = File.open(FILE, "rb") { |f| while (c = f.read(65_536)); yield c; end }
    end
    run lambda { |env|
      body = case env["PATH_INFO"]
             when "/pathname" then Body.new(Pathname(FILE))
             when "/string" then Body.new(FILE)
             else EachOnly.new(FILE)
             end
      [200, {}, body]
    }
  RUBY

  def self.rss_mb(pid) = File.read("/proc/#{pid}/status")[/VmRSS:\s+(\d+)/, 1].to_i / 1024.0

  def self.download(port, path, worker, seconds)
    before = rss_mb(worker)
    s = TCPSocket.new("127.0.0.1", port)
    s.setsockopt(Socket::SOL_SOCKET, Socket::SO_RCVBUF, 65_536)
    s.write("GET #{path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    head = s.readpartial(4096)
    peak = before
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      begin
        s.readpartial(65_536) # 64 KiB every 1/16 s: about 1 MB/s
      rescue EOFError
        break
      end
      sleep 0.0625
      peak = [peak, rss_mb(worker)].max
    end
    s.close
    framing = head[/content-length: \d+|transfer-encoding: chunked/i] || "?"
    format("%-10s %-28s worker RSS %.1f MB -> peak %.1f MB (+%.1f MB)", path, framing, before, peak, peak - before)
  end

  def self.run(argv)
    o = { mb: 50, seconds: 3.0 }
    OptionParser.new do |p|
      p.banner = "Usage: bundle exec ruby bench/file_body_rss.rb [options]"
      p.on("--mb N", Integer, "file size in MB (default 50)") { |v| o[:mb] = v }
      p.on("--seconds S", Float, "how long the client reads (default 3)") { |v| o[:seconds] = v }
    end.parse!(argv)
    Dir.mktmpdir("oribi-file-rss") do |dir|
      file = File.join(dir, "big.bin")
      File.open(file, "wb") { |f| o[:mb].times { f.write(Random.bytes(1 << 20)) } }
      File.write(File.join(dir, "app.ru"), APP)
      port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
      pid = Process.spawn({ "BIG_FILE" => file }, RbConfig.ruby, File.join(ROOT, "exe/oribi"), "-w", "1",
                          "-b", "tcp://127.0.0.1:#{port}", File.join(dir, "app.ru"), %i[out err] => File.join(dir, "log"),
                          pgroup: true)
      begin
        worker = wait_for_worker(pid, port)
        %w[/pathname /string /each].each { |path| puts download(port, path, worker, o[:seconds]) }
      ensure
        Process.kill(:TERM, -pid)
        Process.wait(pid)
      end
    end
  end

  def self.wait_for_worker(pid, port)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
    loop do
      begin
        TCPSocket.new("127.0.0.1", port).close
        children = File.read("/proc/#{pid}/task/#{pid}/children").split.map(&:to_i)
        return children.first if children.any?
      rescue Errno::ECONNREFUSED, Errno::ENOENT
        nil
      end
      raise "the server did not start" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.05 # polling for the server to listen, bounded above
    end
  end
end

FileBodyRss.run(ARGV) if $PROGRAM_NAME == __FILE__
