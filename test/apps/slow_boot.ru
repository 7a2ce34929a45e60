# frozen_string_literal: true

# Takes BOOT_SLEEP seconds (default 2) to load, saying so on stderr first;
# the body names the worker that answered.
$stderr.puts "booting pid #{Process.pid}"
sleep Float(ENV.fetch("BOOT_SLEEP", "2"))
run ->(_env) { [200, { "content-type" => "text/plain" }, ["pid #{Process.pid}\n"]] }
