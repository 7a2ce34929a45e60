# frozen_string_literal: true

# Requests sent to Oribi and to Puma alike; the answers must match.
run lambda { |env|
  path = env["PATH_INFO"]
  info = "#{env['REQUEST_METHOD']} #{path} #{env['QUERY_STRING']} #{env['SERVER_NAME']}:#{env['SERVER_PORT']}"
  case path
  when "/cookies"
    [200, { "set-cookie" => ["a=1; Path=/", "b=2; HttpOnly", "c=3"], "content-type" => "text/plain" }, [info]]
  when "/headers"
    [200, { "x-multi" => %w[one two], "cache-control" => "no-cache", "content-type" => "text/html",
            "vary" => "Accept-Encoding" }, [info]]
  when "/empty"
    [204, {}, []]
  when "/redirect"
    [302, { "location" => "/cookies" }, []]
  when "/stream"
    [200, { "content-type" => "text/plain" }, Enumerator.new { |y| y << "a" << "b" }]
  else
    [200, { "content-type" => "text/plain", "x-path" => path }, [info]]
  end
}
