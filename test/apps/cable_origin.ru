# frozen_string_literal: true

# Action Cable's check of a browser's connection, without Action Cable:
# the Origin must be the app's own scheme, host and port as the request
# shows them (allow_same_origin_as_host), else 404 "Request origin not
# allowed". Behind a proxy the scheme comes from X-Forwarded-Proto and the
# host from Host: a proxy config that drops either is rejected here as
# Action Cable rejects it.
run lambda { |env|
  req = Rack::Request.new(env)
  own = "#{req.scheme}://#{req.host_with_port}"
  if env["HTTP_ORIGIN"] == own
    [200, { "content-type" => "text/plain" }, ["origin allowed: #{own}"]]
  else
    [404, { "content-type" => "text/plain" }, ["Request origin not allowed: #{env['HTTP_ORIGIN']} (app sees #{own})"]]
  end
}
