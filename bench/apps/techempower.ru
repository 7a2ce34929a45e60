# frozen_string_literal: true

# TechEmpower's plaintext and JSON tests as a bare Rack 3 app: /plaintext
# and /json (a JSON object serialised per request), the headers those tests
# require (Server, Date is the server's own). bench/goals.rb sends them 16
# pipelined requests deep, as the plaintext test does.
require "json"

PLAINTEXT = "Hello, World!"

run lambda { |env|
  case env["PATH_INFO"]
  when "/json"
    [200, { "content-type" => "application/json", "server" => "rack" }, [JSON.generate({ message: "Hello, World!" })]]
  else
    [200, { "content-type" => "text/plain", "server" => "rack" }, [PLAINTEXT]]
  end
}
