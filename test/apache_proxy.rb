# frozen_string_literal: true

require "etc"
require_relative "support/proxy_process"

# A real Apache httpd (mod_proxy, mod_proxy_http) in front of Oribi's TCP
# port: clients on 127.0.0.1:PORT, its own minimal httpd.conf (none of
# Debian's /etc/apache2), ServerRoot, PidFile, ErrorLog and runtime files
# in the tmpdir, in the foreground (-DFOREGROUND). The backend is the TCP
# port: as root httpd serves as www-data, which cannot enter the
# root-owned tmpdir a test's unix socket is in.
class ApacheProxy < ProxyProcess
  HTTPD = ENV.fetch("APACHE_HTTPD", File.executable?("/usr/sbin/apache2") ? "/usr/sbin/apache2" : "httpd")
  MODULES = ENV.fetch("APACHE_MODULES", "/usr/lib/apache2/modules")

  def self.available? = system(HTTPD, "-v", %i[out err] => File::NULL) && File.exist?(File.join(MODULES, "mod_proxy_http.so"))

  def initialize(upstream_port)
    super("apache") do |dir|
      conf = File.join(dir, "httpd.conf")
      File.write(conf, config(dir, upstream_port))
      [HTTPD, "-f", conf, "-DFOREGROUND"]
    end
  end

  private

  def log_files = [*super, File.join(@dir, "error.log")]

  def config(dir, upstream_port)
    user = Process.uid.zero? ? "User #{Etc.getpwnam('www-data').name}\nGroup #{Etc.getgrnam('www-data').name}" : ""
    modules = %w[mpm_event authz_core proxy proxy_http].map do |m|
      "LoadModule #{m}_module #{File.join(MODULES, "mod_#{m}.so")}"
    end
    <<~CONF
      ServerRoot #{dir}
      DefaultRuntimeDir #{dir}
      PidFile #{dir}/httpd.pid
      ErrorLog #{dir}/error.log
      LogLevel warn
      ServerName 127.0.0.1
      Listen 127.0.0.1:#{@port}
      #{modules.join("\n")}
      #{user}
      ProxyPass / http://127.0.0.1:#{upstream_port}/
      ProxyPassReverse / http://127.0.0.1:#{upstream_port}/
    CONF
  end
end
