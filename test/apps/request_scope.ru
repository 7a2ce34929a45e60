# frozen_string_literal: true

# An app that keeps what one request's env handed it and uses it during
# another request: each path is a step of test/request_scope_test.rb.
KEPT = {}

def attempt
  "#{yield.inspect[0, 40]} returned"
rescue StandardError => e
  "#{e.class} raised"
end

run lambda { |env|
  case env["PATH_INFO"]
  when "/close-input"
    env["rack.input"].close
    [200, {}, ["closed"]]
  when "/read-input"
    [200, {}, ["read #{env['rack.input'].read.inspect}"]]
  when "/keep" # the callables of this request, for a later one
    KEPT[:hints] = env["rack.early_hints"]
    KEPT[:hijack] = env["rack.hijack"]
    [200, {}, ["kept"]]
  when "/use-kept" # another request, on the same app thread
    hints = attempt { KEPT[:hints].call({ "link" => "</kept.css>; rel=preload" }) }
    hijack = attempt { KEPT[:hijack].call }
    # what its own callables do meanwhile
    own = attempt { env["rack.early_hints"].call({ "link" => "</own.css>; rel=preload" }) }
    [200, {}, ["hints: #{hints}\nhijack: #{hijack}\nown: #{own}\n"]]
  else
    [404, {}, ["no"]]
  end
}
