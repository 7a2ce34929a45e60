# frozen_string_literal: true

# For test/pipelining_test.rb: /sleep?s=SECONDS waits that long; /big?kb=N
# answers N KiB of its path's letter; /fields answers with its X-F-* header
# fields, "name=value" a line each in the order sent; any other path is
# echoed back.
run lambda { |env|
  q = env["QUERY_STRING"]
  case env["PATH_INFO"]
  when "/fields"
    fields = env.keys.grep(/\AHTTP_X_F_/).sort_by { |k| k[/\d+/].to_i }
    [200, { "content-type" => "text/plain" }, [fields.map { |k| "#{k}=#{env[k]}\n" }.join]]
  when "/sleep"
    sleep q[/s=([\d.]+)/, 1].to_f
    [200, {}, ["slept"]]
  when "/big"
    [200, { "content-type" => "text/plain" }, ["b" * (1024 * q[/kb=(\d+)/, 1].to_i)]]
  else
    [200, { "content-type" => "text/plain" }, [env["PATH_INFO"]]]
  end
}
