# frozen_string_literal: true

require "etc"
require "fileutils"
require_relative "support/proxy_process"

# A real Squid as a reverse proxy (an accel port, Oribi's TCP port as the
# origin server) in front of Oribi: clients on 127.0.0.1:PORT, no cache
# directory, pid and logs in the tmpdir, in the foreground (-N). The
# origin is the TCP port: Squid serves as its effective user (proxy on
# Debian), which cannot enter the root-owned tmpdir a test's unix socket
# is in; the tmpdir is handed to that user for its logs.
class SquidProxy < ProxyProcess
  SQUID = ENV.fetch("SQUID", File.executable?("/usr/sbin/squid") ? "/usr/sbin/squid" : "squid")

  def self.available? = system(SQUID, "-v", %i[out err] => File::NULL)

  def initialize(upstream_port)
    super("squid") do |dir|
      conf = File.join(dir, "squid.conf")
      File.write(conf, config(dir, upstream_port))
      FileUtils.chown("proxy", "proxy", dir) if Process.uid.zero? && user?("proxy")
      [SQUID, "-N", "-f", conf]
    end
  end

  private

  def user?(name)
    Etc.getpwnam(name)
  rescue ArgumentError
    false
  end

  def log_files = [*super, File.join(@dir, "cache.log")]

  # cache deny all: every request reaches Oribi. shutdown_lifetime 0: on
  # TERM, Squid stops without its default 30 s for open connections, past
  # the 10 s stop gives before KILL (it still takes about 2 s).
  def config(dir, upstream_port)
    <<~CONF
      http_port 127.0.0.1:#{@port} accel defaultsite=127.0.0.1 no-vhost
      cache_peer 127.0.0.1 parent #{upstream_port} 0 no-query no-digest originserver name=oribi
      cache_peer_access oribi allow all
      http_access allow all
      cache deny all
      #{'cache_effective_user proxy' if Process.uid.zero? && user?('proxy')}
      visible_hostname oribi-test
      pid_filename #{dir}/squid.pid
      cache_log #{dir}/cache.log
      access_log stdio:#{dir}/access.log
      cache_store_log none
      coredump_dir #{dir}
      pinger_enable off
      shutdown_lifetime 0 seconds
    CONF
  end
end
