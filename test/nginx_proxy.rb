# frozen_string_literal: true

require "etc"
require "fileutils"
require "socket"
require "timeout"
require "tmpdir"

# A real nginx in front of a unix socket, as Oribi is deployed: clients on
# 127.0.0.1:PORT, upstream HTTP/1.1 with a pool of KEEPALIVE idle
# connections. Started in its own process group, stopped with TERM then KILL.
class NginxProxy
  NGINX = ENV.fetch("NGINX", "nginx")

  attr_reader :port, :dir

  def self.available? = system(NGINX, "-v", %i[out err] => File::NULL)

  # http: more directives for the http block; location: for the location
  def initialize(upstream_sock, keepalive: 32, http: "", location: "")
    @dir = Dir.mktmpdir("oribi-nginx")
    @port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
    conf = File.join(@dir, "nginx.conf")
    File.write(conf, config(upstream_sock, keepalive, http, location))
    @log = File.join(@dir, "nginx.out")
    @pid = Process.spawn(NGINX, "-p", @dir, "-c", conf, "-g", "daemon off;", %i[out err] => @log, pgroup: true)
    ready = wait_until(timeout: 10) do
      TCPSocket.new("127.0.0.1", @port).close || true
    rescue Errno::ECONNREFUSED
      false
    end
    raise "nginx did not start:\n#{log}" unless ready
  end

  def log = [@log, File.join(@dir, "error.log")].select { |f| File.exist?(f) }.map { |f| File.read(f) }.join
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
      Process.kill(:KILL, -@pid) # its workers, should any be left
    rescue Errno::ESRCH, Errno::EPERM
      nil
    end
    FileUtils.rm_rf(@dir)
  end

  private

  def config(sock, keepalive, http, location)
    user = Process.uid.zero? ? "user #{Etc.getpwuid(0).name};" : ""
    temp = %w[client_body proxy fastcgi uwsgi scgi].map { |t| "#{t}_temp_path #{@dir}/#{t};" }.join(" ")
    <<~CONF
      #{user}
      worker_processes 1;
      error_log #{@dir}/error.log info;
      pid #{@dir}/nginx.pid;
      events { worker_connections 1024; }
      http {
        #{temp}
        #{http}
        upstream oribi { server unix:#{sock}; keepalive #{keepalive}; }
        server {
          listen 127.0.0.1:#{@port} backlog=1024;
          location / {
            proxy_pass http://oribi;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            #{location}
          }
        }
      }
    CONF
  end
end
