# frozen_string_literal: true

# Wraps the app named by $BENCH_APP and answers GET /__alloc with this
# process's GC.stat(:total_allocated_objects): bench/suite reads it before
# and after N requests to count the objects allocated per request, server
# and app together. The dispatch itself allocates nothing.
inner = Rack::Builder.parse_file(ENV.fetch("BENCH_APP"))
inner = inner.first if inner.is_a?(Array)
run lambda { |env|
  if env["PATH_INFO"] == "/__alloc"
    [200, { "content-type" => "text/plain" }, ["#{Process.pid} #{GC.stat(:total_allocated_objects)}\n"]]
  else
    inner.call(env)
  end
}
