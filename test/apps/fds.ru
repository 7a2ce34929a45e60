# frozen_string_literal: true

# For the fd limit tests: /hog?n=N makes the worker hold N more fds (as an
# app's files and database connections do), /limits says its
# RLIMIT_NOFILE, anything else its pid.
HOGGED = []

run lambda { |env|
  case env["PATH_INFO"]
  when "/hog"
    Integer(env["QUERY_STRING"][/n=(\d+)/, 1]).times { HOGGED << File.open(File::NULL) }
    [200, {}, ["hogged #{HOGGED.size}\n"]]
  when "/limits"
    [200, {}, [File.read("/proc/self/limits")[/^Max open files.*$/]]]
  else
    [200, {}, ["pid: #{Process.pid}\n"]]
  end
}
