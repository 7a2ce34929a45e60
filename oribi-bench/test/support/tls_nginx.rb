# frozen_string_literal: true

require "etc"
require "open3"
require_relative "../../../test/support/proxy_process"

# A real nginx serving HTTPS with a self-signed certificate made here by
# `openssl req` (names: localhost, a.test, IP 127.0.0.1), and plain HTTP on
# a second port: the same server both ways, for one run to compare. Answers
# 200 "hello", or 201 when the client's SNI was a.test.
class TlsNginx < ProxyProcess
  NGINX = ENV.fetch("NGINX", "nginx")

  def self.available? = system(NGINX, "-v", %i[out err] => File::NULL) && system("openssl", "version", out: File::NULL)

  attr_reader :plain_port, :cert

  def initialize(keepalive_requests: 1000)
    @plain_port = free_port
    super("nginx-tls") do |dir|
      @cert = File.join(dir, "cert.pem")
      key = File.join(dir, "key.pem")
      _, err, st = Open3.capture3("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                                  "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,DNS:a.test,IP:127.0.0.1",
                                  "-keyout", key, "-out", @cert)
      raise "openssl req failed: #{err}" unless st.success?

      conf = File.join(dir, "nginx.conf")
      File.write(conf, config(dir, key, keepalive_requests))
      [NGINX, "-p", dir, "-c", conf, "-g", "daemon off;"]
    end
  end

  private

  def log_files = [*super, File.join(@dir, "error.log")]

  def config(dir, key, keepalive_requests)
    user = Process.uid.zero? ? "user #{Etc.getpwuid(0).name};" : ""
    temp = %w[client_body proxy fastcgi uwsgi scgi].map { |t| "#{t}_temp_path #{dir}/#{t};" }.join(" ")
    <<~CONF
      #{user}
      worker_processes 1;
      error_log #{dir}/error.log info;
      pid #{dir}/nginx.pid;
      events { worker_connections 1024; }
      http {
        #{temp}
        access_log off;
        default_type text/plain;
        keepalive_requests #{keepalive_requests};
        server {
          listen 127.0.0.1:#{@port} ssl backlog=1024;
          listen 127.0.0.1:#{@plain_port} backlog=1024;
          ssl_certificate #{@cert};
          ssl_certificate_key #{key};
          location / {
            if ($ssl_server_name = "a.test") { return 201 "a"; }
            return 200 "hello";
          }
        }
      }
    CONF
  end
end
