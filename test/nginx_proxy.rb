# frozen_string_literal: true

require "etc"
require_relative "support/proxy_process"

# A real nginx in front of a unix socket, as Oribi is deployed: clients on
# 127.0.0.1:PORT, upstream HTTP/1.1 with a pool of KEEPALIVE idle
# connections. Started in its own process group, stopped with TERM then KILL.
class NginxProxy < ProxyProcess
  NGINX = ENV.fetch("NGINX", "nginx")

  def self.available? = system(NGINX, "-v", %i[out err] => File::NULL)

  # Its version as Integers ([1, 22, 1]: compare with <=>); nil when not installed
  def self.version
    out = IO.popen([NGINX, "-v", { err: %i[child out] }], &:read)
    out[%r{nginx/(\d+(?:\.\d+)+)}, 1]&.split(".")&.map(&:to_i)
  rescue SystemCallError
    nil
  end

  # http: more directives for the http block; location: for the location
  def initialize(upstream_sock, keepalive: 32, http: "", location: "")
    super("nginx") do |dir|
      conf = File.join(dir, "nginx.conf")
      File.write(conf, config(upstream_sock, keepalive, http, location))
      [NGINX, "-p", dir, "-c", conf, "-g", "daemon off;"]
    end
  end

  private

  def log_files = [*super, File.join(@dir, "error.log")]

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
