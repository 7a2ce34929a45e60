# frozen_string_literal: true

# Starts a server whose command line cannot say what the suite needs (two
# listeners, a unix socket, one Ruby thread, no request log) through its
# Ruby API instead:
#
#   ruby bench/suite/launch.rb SERVER WORKERS UNIX_PATH|- TCP_PORT|- APP.ru
#
# Run under BUNDLE_GEMFILE=bench/Gemfile by bench/suite.rb.
require "rack"

server, workers, unix_path, port, ru = ARGV
workers = Integer(workers)
unix_path = nil if unix_path == "-"
port = port == "-" ? nil : Integer(port)
app = Rack::Builder.parse_file(ru)
app = app.first if app.is_a?(Array) # rack 2's [app, options]

case server
when "iodine"
  require "iodine"
  Iodine.threads = 1
  Iodine.workers = workers
  Iodine.verbosity = 2 # warnings and errors; no per-request log
  Iodine.listen(service: :http, handler: app, address: unix_path, port: 0) if unix_path
  Iodine.listen(service: :http, handler: app, address: "127.0.0.1", port: port.to_s) if port
  Iodine.start
when "agoo"
  require "agoo"
  Agoo::Log.configure(dir: "", console: true, classic: true,
                      states: { INFO: false, DEBUG: false, connect: false, request: false,
                                response: false, eval: false, push: false })
  binds = []
  binds << "unix://#{unix_path}" if unix_path
  binds << "http://127.0.0.1:#{port}" if port
  Agoo::Server.init(0, "/nonexistent", thread_count: 1, worker_count: workers, bind: binds)
  Agoo::Server.handle(nil, "**", app)
  Agoo::Server.start # returns at once with thread_count >= 1
  sleep
when "rhebok"
  require "rack/handler/rhebok"
  opts = { MaxWorkers: workers, MaxRequestPerChild: 0, BackLog: 1024 }
  # one listener only: the suite boots it once per transport
  if unix_path
    opts[:Path] = unix_path
  else
    opts.merge!(Host: "127.0.0.1", Port: port)
  end
  Rack::Handler::Rhebok.run(app, **opts)
else
  abort "launch.rb: unknown server #{server}"
end
