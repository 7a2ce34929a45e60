# frozen_string_literal: true

require_relative "support/proxy_process"

# A real Varnish in front of Oribi's TCP port: clients on 127.0.0.1:PORT,
# run in the foreground (-F) with its working directory (-n) in the
# tmpdir, no management port (-T none) and a small malloc store. The
# backend is the TCP port: varnishd's child runs as the varnish user,
# which cannot enter the root-owned tmpdir a test's unix socket is in.
class VarnishProxy < ProxyProcess
  VARNISHD = ENV.fetch("VARNISHD", File.executable?("/usr/sbin/varnishd") ? "/usr/sbin/varnishd" : "varnishd")

  def self.available? = system(VARNISHD, "-V", %i[out err] => File::NULL)

  def initialize(upstream_port)
    super("varnish") do |dir|
      vcl = File.join(dir, "default.vcl")
      File.write(vcl, <<~VCL)
        vcl 4.1;
        backend oribi { .host = "127.0.0.1"; .port = "#{upstream_port}"; }
      VCL
      # The jail's users read the VCL and write the working directory.
      File.chmod(0o755, dir)
      [VARNISHD, "-F", "-n", File.join(dir, "work"), "-a", "127.0.0.1:#{@port}", "-T", "none",
       "-f", vcl, "-s", "malloc,16m"]
    end
  end
end
