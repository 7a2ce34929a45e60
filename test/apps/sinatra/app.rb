# frozen_string_literal: true

# `ruby app.rb -p PORT -o HOST` as a Sinatra user starts a classic app; the
# server is chosen the way the Sinatra docs say, by name. WORKERS goes to
# Oribi through server_settings, as `-O Workers=` would through rackup.
require "sinatra"
require_relative "../../support/sse_timing"

set :server, :oribi
set :server_settings, { Workers: Integer(ENV.fetch("WORKERS", "1")) }

get "/" do
  "Sinatra on #{settings.handler_name}: multiprocess=#{env['rack.multiprocess']}"
end

post "/echo" do
  params["msg"]
end

# Server-Sent Events through Sinatra's stream helper, stamped (SSETiming).
get "/events" do
  content_type "text/event-stream"
  stream do |out|
    Integer(params.fetch("n", "3")).times do |i|
      sleep SSETiming::GAP if i.positive?
      out << SSETiming.event
    end
  end
end
