# frozen_string_literal: true

# Waits ?ms=N milliseconds (a slow endpoint), then names the worker that
# answered: "ok PID". For bench/drain.rb.
run lambda { |env|
  ms = env["QUERY_STRING"][/ms=(\d+)/, 1].to_i
  sleep ms / 1000.0 if ms.positive?
  [200, { "content-type" => "text/plain" }, ["ok #{Process.pid}\n"]]
}
