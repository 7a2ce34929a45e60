# frozen_string_literal: true

require_relative "support/proxy_process"

# A real Caddy in front of Oribi's unix socket: clients on 127.0.0.1:PORT
# in clear (auto_https off), no admin endpoint (admin off: it would take
# localhost:2019), reverse_proxy to the socket, its data and config
# directories (XDG_*) in the tmpdir, in the foreground (caddy run).
class CaddyProxy < ProxyProcess
  CADDY = ENV.fetch("CADDY", "caddy")

  def self.available? = system(CADDY, "version", %i[out err] => File::NULL)

  def initialize(upstream_sock)
    env = {}
    super("caddy", env: env) do |dir|
      env.merge!("HOME" => dir, "XDG_DATA_HOME" => File.join(dir, "data"), "XDG_CONFIG_HOME" => File.join(dir, "config"))
      conf = File.join(dir, "Caddyfile")
      File.write(conf, <<~CADDYFILE)
        {
          admin off
          auto_https off
        }
        http://:#{@port} {
          bind 127.0.0.1
          reverse_proxy #{upstream_sock.start_with?("/") ? "unix/" : ""}#{upstream_sock}
        }
      CADDYFILE
      [CADDY, "run", "--config", conf, "--adapter", "caddyfile"]
    end
  end
end
