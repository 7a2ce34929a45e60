# frozen_string_literal: true

# The smallest Rack 3 app: what bench/compare.rb and bench/suite.rb serve,
# so the numbers measure the servers, not the app.
run ->(env) { [200, { "content-type" => "text/plain" }, ["Hello, World!\n"]] }
