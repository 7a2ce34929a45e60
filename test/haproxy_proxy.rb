# frozen_string_literal: true

require "fileutils"
require "socket"
require "timeout"
require "tmpdir"

# A real haproxy in HTTP mode in front of a unix socket: clients on
# 127.0.0.1:PORT, the frontend's http-request rules given by the test (a
# deny rule is what a request smuggled past it would escape). Run in the
# foreground (-db) in its own process group, stopped with TERM then KILL.
class HaproxyProxy
  HAPROXY = ENV.fetch("HAPROXY", File.executable?("/usr/sbin/haproxy") ? "/usr/sbin/haproxy" : "haproxy")

  attr_reader :port, :dir

  def self.available? = system(HAPROXY, "-v", %i[out err] => File::NULL)

  # frontend: more lines for the frontend section, e.g. an http-request deny
  def initialize(upstream_sock, frontend: "")
    @dir = Dir.mktmpdir("oribi-haproxy")
    @port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
    conf = File.join(@dir, "haproxy.cfg")
    File.write(conf, config(upstream_sock, frontend))
    @log = File.join(@dir, "haproxy.out")
    @pid = Process.spawn(HAPROXY, "-db", "-f", conf, %i[out err] => @log, pgroup: true)
    ready = wait_until(timeout: 10) do
      TCPSocket.new("127.0.0.1", @port).close || true
    rescue Errno::ECONNREFUSED
      false
    end
    raise "haproxy did not start:\n#{log}" unless ready
  end

  def log = File.exist?(@log) ? File.read(@log) : ""
  def tcp = TCPSocket.new("127.0.0.1", @port)

  def stop
    begin
      Process.kill(:TERM, @pid)
      Timeout.timeout(10) { Process.wait(@pid) }
    rescue Timeout::Error
      Process.kill(:KILL, -@pid)
      Process.wait(@pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end
    begin
      Process.kill(:KILL, -@pid) # anything of its group still there
    rescue Errno::ESRCH, Errno::EPERM
      nil
    end
    FileUtils.rm_rf(@dir)
  end

  private

  # Keep-alive on both sides (http-keep-alive is haproxy's default), so a
  # client's second request may go over the server connection of its first.
  def config(sock, frontend)
    <<~CONF
      global
        maxconn 256
      defaults
        mode http
        timeout connect 5s
        timeout client 30s
        timeout server 30s
        timeout tunnel 30s
      frontend fe
        bind 127.0.0.1:#{@port}
        #{frontend}
        default_backend oribi
      backend oribi
        server oribi #{sock}
    CONF
  end
end
