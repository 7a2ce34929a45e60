# frozen_string_literal: true

# Answers every request with what it received, as "key: value" lines,
# under Rack::Lint so the env and the response are checked against SPEC.
require "rack"

KEYS = %w[REQUEST_METHOD SCRIPT_NAME PATH_INFO QUERY_STRING SERVER_NAME SERVER_PORT
          SERVER_PROTOCOL REMOTE_ADDR CONTENT_LENGTH CONTENT_TYPE HTTP_HOST
          HTTP_X_FORWARDED_FOR HTTP_COOKIE HTTP_X_TEST HTTP_PROXY rack.url_scheme REQUEST_URI].freeze

echo = lambda do |env|
  input = env["rack.input"]
  env["rack.errors"].puts("served #{env['REQUEST_METHOD']} #{env['PATH_INFO']}")
  env["rack.errors"].flush
  body = input ? input.read : ""
  lines = KEYS.filter_map { |k| "#{k}: #{env[k]}" if env.key?(k) }
  lines << "pid: #{Process.pid}"
  lines << "input-class: #{env['test.input_class']}"
  lines << "body-bytes: #{body.bytesize}"
  lines << "rewind-ok: #{env['test.rewind_ok']}"
  lines << "body-md5: #{Digest::MD5.hexdigest(body)}"
  lines << "body: #{body}" if body.bytesize <= 256 && !body.include?("\n")
  [200, { "content-type" => "text/plain" }, [lines.join("\n") + "\n"]]
end
require "digest/md5"

# records what the server passed before Lint wraps it
use(Class.new do
  def initialize(app) = @app = app

  def call(env)
    input = env["rack.input"]
    env["test.input_class"] = input.class.name
    # Lint hides rewind (optional since Rack 3.1); ours must still have it
    data = input.read
    input.rewind
    env["test.rewind_ok"] = input.read == data
    input.rewind
    @app.call(env)
  end
end)
use Rack::Lint
run echo
