# frozen_string_literal: true

# Answers every request with what it received, as "key: value" lines,
# under Rack::Lint so the env and the response are checked against SPEC.
require "rack"

KEYS = %w[REQUEST_METHOD SCRIPT_NAME PATH_INFO QUERY_STRING SERVER_NAME SERVER_PORT
          SERVER_PROTOCOL REMOTE_ADDR CONTENT_LENGTH CONTENT_TYPE HTTP_HOST
          HTTP_X_FORWARDED_FOR HTTP_COOKIE HTTP_X_TEST rack.url_scheme REQUEST_URI].freeze

echo = lambda do |env|
  input = env["rack.input"]
  body = input ? input.read : ""
  lines = KEYS.filter_map { |k| "#{k}: #{env[k]}" if env.key?(k) }
  lines << "pid: #{Process.pid}"
  lines << "input-class: #{input.class}"
  lines << "body-bytes: #{body.bytesize}"
  lines << "body-md5: #{Digest::MD5.hexdigest(body)}"
  lines << "body: #{body}" if body.bytesize <= 256
  [200, { "content-type" => "text/plain" }, [lines.join("\n") + "\n"]]
end
require "digest/md5"

use Rack::Lint
run echo
