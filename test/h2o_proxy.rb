# frozen_string_literal: true

require_relative "support/proxy_process"

# A real h2o in front of Oribi's TCP port: clients on 127.0.0.1:PORT
# (HTTP/1.1 in clear), proxy.reverse.url to Oribi, pid and logs in the
# tmpdir, in the foreground (h2o does not daemonize unless told). As root
# it must be given a user to serve as (nobody), which cannot enter the
# root-owned tmpdir a test's unix socket is in: hence the TCP port.
class H2oProxy < ProxyProcess
  H2O = ENV.fetch("H2O", "h2o")

  def self.available? = system(H2O, "-v", %i[out err] => File::NULL)

  def initialize(upstream_port)
    super("h2o") do |dir|
      conf = File.join(dir, "h2o.conf")
      File.write(conf, config(dir, upstream_port))
      [H2O, "-c", conf]
    end
  end

  private

  def log_files = [*super, File.join(@dir, "error.log")]

  def config(dir, upstream_port)
    <<~YAML
      #{'user: nobody' if Process.uid.zero?}
      error-log: #{dir}/error.log
      access-log: #{dir}/access.log
      listen:
        host: 127.0.0.1
        port: #{@port}
      hosts:
        default:
          paths:
            /:
              proxy.reverse.url: http://127.0.0.1:#{upstream_port}/
    YAML
  end
end
