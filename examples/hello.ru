# frozen_string_literal: true

# The smallest Rack 3 app: `bundle exec oribi examples/hello.ru`, then
# `curl http://localhost:9292/`.
run ->(env) { [200, { "content-type" => "text/plain" }, ["Hello from Oribi\n"]] }
