# frozen_string_literal: true

# An app that waits 10 ms (a database call, say): the server's cost
# disappears and its scheduling of waiting workers is what shows.
run lambda { |env|
  sleep 0.01
  [200, { "content-type" => "text/plain" }, ["slept 10ms\n"]]
}
