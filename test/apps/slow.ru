# frozen_string_literal: true

# Sleeps for ?sleep=SECONDS (default 0), or computes in Ruby, holding the
# GVL but for Ruby's switches between threads, for ?spin=SECONDS; says so
# on stderr first. The body names the worker that answered.
run lambda { |env|
  secs = env["QUERY_STRING"][/sleep=([\d.]+)/, 1].to_f
  spin = env["QUERY_STRING"][/spin=([\d.]+)/, 1].to_f
  if secs.positive?
    $stderr.puts "sleeping #{secs}"
    sleep secs
  elsif spin.positive?
    $stderr.puts "spinning #{spin}"
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + spin
    nil while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  end
  [200, { "content-type" => "text/plain" }, ["slept #{secs} pid #{Process.pid}\n"]]
}
