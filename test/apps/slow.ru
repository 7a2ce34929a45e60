# frozen_string_literal: true

# Sleeps for ?sleep=SECONDS (default 0), saying so on stderr first; the
# body names the worker that answered.
run lambda { |env|
  secs = env["QUERY_STRING"][/sleep=([\d.]+)/, 1].to_f
  if secs.positive?
    $stderr.puts "sleeping #{secs}"
    sleep secs
  end
  [200, { "content-type" => "text/plain" }, ["slept #{secs} pid #{Process.pid}\n"]]
}
