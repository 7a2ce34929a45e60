# frozen_string_literal: true

# "PID GC_COUNT", after sleeping ?sleep=SECONDS (saying so on stderr first).
run lambda { |env|
  secs = env["QUERY_STRING"][/sleep=([\d.]+)/, 1].to_f
  if secs.positive?
    $stderr.puts "sleeping #{secs}"
    sleep secs
  end
  [200, { "content-type" => "text/plain" }, ["#{Process.pid} #{GC.count}\n"]]
}
