# frozen_string_literal: true

require_relative "support/proxy_process"

# A real haproxy in HTTP mode in front of a unix socket: clients on
# 127.0.0.1:PORT, the frontend's http-request rules given by the test (a
# deny rule is what a request smuggled past it would escape). Run in the
# foreground (-db) in its own process group, stopped with TERM then KILL.
class HaproxyProxy < ProxyProcess
  HAPROXY = ENV.fetch("HAPROXY", File.executable?("/usr/sbin/haproxy") ? "/usr/sbin/haproxy" : "haproxy")

  def self.available? = system(HAPROXY, "-v", %i[out err] => File::NULL)

  # frontend: more lines for the frontend section, e.g. an http-request
  # deny; server: options of the server line, e.g. send-proxy
  def initialize(upstream_sock, frontend: "", server: "")
    super("haproxy") do |dir|
      conf = File.join(dir, "haproxy.cfg")
      File.write(conf, config(upstream_sock, frontend, server))
      [HAPROXY, "-db", "-f", conf]
    end
  end

  private

  # Keep-alive on both sides (http-keep-alive is haproxy's default), so a
  # client's second request may go over the server connection of its first.
  def config(sock, frontend, server)
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
        server oribi #{sock} #{server}
    CONF
  end
end
