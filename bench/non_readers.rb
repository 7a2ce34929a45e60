# frozen_string_literal: true

# Clients that do not read their responses, against one single-threaded
# process of each server (Oribi, and Puma when installed), over a unix
# socket (small socket buffers: what a client does not read stays in the
# server):
#
# - bloat: N clients each ask for a 1 MiB Array body and read nothing;
#   reports the server's RSS growth, and how long a normal request then takes.
# - stall: one client asks for a 16 MiB file (a to_path body), or for a
#   32 MiB body streamed by each, and reads nothing; reports how long a
#   normal request beside it takes.
#
#   ruby -Ilib bench/non_readers.rb [--clients 300] [--servers oribi,puma] [--oribi-args "--max-response-spool 0"]
require "optparse"
require "socket"
require "tmpdir"
require "rbconfig"

module NonReaders
  ROOT = File.expand_path("..", __dir__)
  APP = File.join(ROOT, "test/apps/readers.ru")

  def self.command(server, sock, oribi_args)
    case server
    when "oribi" then [RbConfig.ruby, "-I#{ROOT}/lib", "#{ROOT}/exe/oribi", "-w", "0", "-t", "1", "-b", "unix://#{sock}", *oribi_args, APP]
    when "puma" then [RbConfig.ruby, "-S", "puma", "-w", "0", "-t", "1:1", "-b", "unix://#{sock}", "-q", APP]
    end
  end

  def self.now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def self.start(server, dir, oribi_args)
    sock = File.join(dir, "#{server}.sock")
    pid = Process.spawn(*command(server, sock, oribi_args), %i[out err] => File.join(dir, "#{server}.log"), pgroup: true)
    deadline = now + 20
    sleep 0.05 until listening?(sock) || now > deadline # polling for the listener; nothing to wait on
    raise "#{server} did not start" unless listening?(sock)

    [pid, sock]
  end

  def self.listening?(sock)
    UNIXSocket.new(sock).close
    true
  rescue SystemCallError
    false
  end

  def self.rss_mib(pid) = File.read("/proc/#{pid}/status")[/^VmRSS:\s+(\d+)/, 1].to_i / 1024.0

  def self.get(sock, path)
    s = UNIXSocket.new(sock)
    s.write("GET #{path} HTTP/1.1\r\nHost: b\r\n\r\n")
    s
  end

  # Seconds until a normal GET / is answered (nil: not within 60 s).
  def self.wait_of(sock)
    t = now
    s = get(sock, "/")
    s.wait_readable(60) ? now - t : nil
  ensure
    s&.close
  end

  def self.bloat(sock, pid, clients)
    get(sock, "/array").tap { |s| s.wait_readable(10) }.close # warm
    before = rss_mib(pid)
    stalled = Array.new(clients) { get(sock, "/array") }
    sleep 3 # what the server holds once every client has asked
    grown = rss_mib(pid) - before
    [grown, wait_of(sock)]
  ensure
    stalled&.each(&:close)
  end

  def self.stall(sock, path)
    stalled = get(sock, path)
    stalled.wait_readable(10)
    wait_of(sock)
  ensure
    stalled&.close
  end

  def self.main(argv)
    clients = 300
    servers = %w[oribi puma]
    oribi_args = []
    OptionParser.new do |o|
      o.on("--clients N", Integer) { |n| clients = n }
      o.on("--servers LIST", Array) { |l| servers = l }
      o.on("--oribi-args ARGS", String) { |a| oribi_args = a.split }
    end.parse!(argv)
    servers.select! { |s| s == "oribi" || system(RbConfig.ruby, "-S", "puma", "--version", %i[out err] => File::NULL) }
    begin
      Process.setrlimit(:NOFILE, 4096)
    rescue Errno::EPERM
      nil # as many clients as the limit allows
    end
    puts "| server | RSS growth, #{clients} non-readers of 1 MiB | then a GET / " \
         "| GET / beside a non-reader of a 16 MiB file | … of a 32 MiB each body |"
    puts "|---|---|---|---|---|"
    Dir.mktmpdir do |dir|
      servers.each do |server|
        row = [server]
        [:bloat, "/file", "/each?mb=32"].each do |scenario|
          pid, sock = start(server, dir, oribi_args)
          begin
            if scenario == :bloat
              grown, wait = bloat(sock, pid, clients)
              row << format("%.0f MiB", grown) << (wait ? format("%.2f s", wait) : "> 60 s")
            else
              wait = stall(sock, scenario)
              row << (wait ? format("%.2f s", wait) : "> 60 s")
            end
          ensure
            Process.kill(:KILL, -pid)
            Process.wait(pid)
          end
        end
        puts "| #{row.join(' | ')} |"
      end
    end
  end
end

NonReaders.main(ARGV) if $PROGRAM_NAME == __FILE__
