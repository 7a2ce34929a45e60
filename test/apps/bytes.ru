# frozen_string_literal: true

# Paths that carry request bytes into the places that report them: an
# exception whose message holds the path, Rack's own parse errors, a
# request slow enough to be seen in /stats or by soft_timeout, a response
# header the server must drop, and a thread of the app's that dies.
# ?sleep=SECONDS first, for every path.
run lambda { |env|
  secs = env["QUERY_STRING"][/sleep=([\d.]+)/, 1].to_f
  sleep secs if secs.positive?
  path = env["PATH_INFO"]
  case path
  when %r{\A/raise}n
    raise "app failure on #{path}"
  when %r{\A/params}n
    [200, {}, [Rack::Request.new(env).GET.inspect]]
  when %r{\A/header}n
    [200, { "x-bad" => "a\r\n#{path}", "x-good" => "ok" }, ["header"]]
  else
    [200, { "content-type" => "text/plain" }, ["ok #{Process.pid}\n"]]
  end
}
