# frozen_string_literal: true

require "rbconfig"

# The command lines of the benches of connections that stay (streams.rb,
# waits.rb, fibers.rb): Oribi with the bench's own options, Puma 8 from a
# config of the bench's lines, Falcon; each on tcp://127.0.0.1:PORT with
# the same number of workers and the same app.
module PeerServers
  ORIBI = File.expand_path("../exe/oribi", __dir__)

  module_function

  # oribi: its options besides -w and -b; puma: lines of its config
  # besides workers, bind and rackup.
  def command(server, dir, port, app, workers:, oribi: [], puma: [])
    case server
    when "oribi" then [RbConfig.ruby, ORIBI, "-w", workers.to_s, *oribi, "-b", "tcp://127.0.0.1:#{port}", app]
    when "puma"
      conf = File.join(dir, "puma.rb")
      File.write(conf, ["workers #{workers}", *puma, %(bind "tcp://127.0.0.1:#{port}"), "rackup #{app.inspect}", ""].join("\n"))
      [RbConfig.ruby, "-S", "puma", "-C", conf]
    when "falcon" then ["falcon", "serve", "--count", workers.to_s, "--bind", "http://127.0.0.1:#{port}", "--config", app]
    else abort "unknown server #{server}"
    end
  end
end
