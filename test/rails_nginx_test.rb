# frozen_string_literal: true

require "test_helper"
require_relative "nginx_proxy"

# docs/RAILS.md's nginx config, as a team copies it, in front of a real
# Oribi: only the socket path and the port are this test's. Its /cable
# location set no Host and no X-Forwarded-Proto, and Action Cable refused
# every browser (404, "Request origin not allowed"): test/apps/cable_origin.ru
# makes Action Cable's check.
class RailsNginxTest < Minitest::Test
  DOC = File.read(File.join(ROOT, "docs/RAILS.md"))

  def setup
    skip "nginx is not installed" unless NginxProxy.available?
    @srv = ServerProcess.new("cable_origin.ru", workers: 1, tcp: false)
  end

  def teardown
    @nginx&.stop
    @srv&.stop
  end

  # The ```nginx block under "## nginx in front", pointed at this test's
  # socket and a loopback port.
  def documented_server_block(port)
    section = DOC[/^## nginx in front\n(.*?)(?=^## )/m, 1] or flunk "no nginx section in docs/RAILS.md"
    block = section[/```nginx\n(.*?)```/m, 1] or flunk "no nginx block in the section"
    block.sub("unix:/run/app/oribi.sock", "unix:#{@srv.sock}").sub(/listen 80;/, "listen 127.0.0.1:#{port};")
  end

  def start_nginx
    @nginx = Class.new(ProxyProcess) do
      def initialize(block_for_port)
        super("nginx") do |dir|
          conf = File.join(dir, "nginx.conf")
          temp = %w[client_body proxy fastcgi uwsgi scgi].map { |t| "#{t}_temp_path #{dir}/#{t};" }.join(" ")
          File.write(conf, <<~CONF)
            #{'user root;' if Process.uid.zero?}
            worker_processes 1;
            error_log #{dir}/error.log info;
            pid #{dir}/nginx.pid;
            events { worker_connections 64; }
            http { #{temp}
            #{block_for_port.call(@port)} }
          CONF
          [NginxProxy::NGINX, "-p", dir, "-c", conf, "-g", "daemon off;"]
        end
      end
    end.new(method(:documented_server_block))
  end

  def test_action_cable_and_pages_pass_the_origin_check_behind_the_documented_nginx
    start_nginx
    host = "app.example:#{@nginx.port}"
    { "/cable" => { "Upgrade" => "websocket", "Connection" => "Upgrade" }, "/" => {} }.each do |path, extra|
      res = HTTPClient.request(@nginx.tcp, path, headers: { "Host" => host, "Origin" => "http://#{host}" }.merge(extra))
      assert_equal 200, res.status, "#{path}: #{res.body}"
      assert_equal "origin allowed: http://#{host}", res.body
    end
  end
end
