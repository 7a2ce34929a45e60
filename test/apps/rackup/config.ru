# frozen_string_literal: true

# Started by `rackup -s oribi` in test/rackup_test.rb; in development rackup
# wraps it in Rack::Lint, so the env Oribi builds is checked on the way.
run lambda { |env|
  body = "#{ENV['RACK_ENV']} multiprocess=#{env['rack.multiprocess']} pid=#{Process.pid} " \
         "#{env['REQUEST_METHOD']} #{env['PATH_INFO']} #{env['rack.input']&.read}"
  [200, { "content-type" => "text/plain" }, [body]]
}
