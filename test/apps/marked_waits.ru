# frozen_string_literal: true

# Requests that wait on an upstream: /wait?marked=1 tells the server first,
# as Puma 8 apps do (env["puma.mark_as_io_bound"]), then sleeps 1 s;
# /wait sleeps without telling (each logs "wait begun"); / answers at once. The body says whether
# the server offered the callable (Puma 8 always does).
run lambda { |env|
  mark = env["puma.mark_as_io_bound"]
  case env["PATH_INFO"]
  when "/wait"
    mark.call if mark && env["QUERY_STRING"] == "marked=1"
    warn "wait begun"
    sleep 1
    [200, {}, ["waited"]]
  when "/mark-twice"
    2.times { mark.call }
    [200, {}, ["marked twice"]]
  else
    [200, {}, ["hello offered=#{!mark.nil?}"]]
  end
}
