# frozen_string_literal: true

# Instructions per request in the worker's engine (Oribi::Engine's
# next_request and respond, with all they call), user space, counted by
# callgrind: hello world on a unix socket, one process (-w 0), keep-alive and a
# connection per request, for one or more checkouts (before and after a
# change). Counts do not depend on the machine's load, so this runs on a
# shared machine where a timed benchmark would not.
#
#   bundle exec ruby bench/instructions.rb [--requests 2000] [--repeat 5] [--root DIR]...
#
# Each DIR is a checkout with its extension built (default: this one). Per
# run: 300 requests to warm up, the counters zeroed (callgrind_control -z),
# N requests, the counters dumped (-d); the dump's total over N is printed.
require "optparse"
require "rbconfig"
require "socket"
require "tmpdir"
require "fileutils"
require_relative "../lib/oribi/loadgen"
require_relative "../lib/oribi/bench"

roots = []
requests = 2000
repeat = 1
OptionParser.new do |o|
  o.on("--requests N", Integer, "requests counted per run (default #{requests})") { |v| requests = v }
  o.on("--repeat N", Integer, "runs per cell; the fewest instructions counts (default 1)") { |v| repeat = v }
  o.on("--root DIR", "a checkout to measure (repeatable; default this one)") { |v| roots << File.expand_path(v) }
end.parse!
roots << File.expand_path("..", __dir__) if roots.empty?
abort "instructions: valgrind is not installed" unless system("which valgrind callgrind_control > /dev/null")
APP = File.expand_path("apps/hello.ru", __dir__)
# The engine's two calls per request (the loop, the env, the response
# written) and what they call: not the app, nor Ruby's own periodic work,
# which a run slowed down by valgrind and by the machine's load would
# spread over the requests unevenly.
TOGGLE = %w[engine_next_request engine_respond].map { |f| "--toggle-collect=#{f}" }.freeze

def load(sock, requests, keepalive)
  Oribi::Loadgen.run(unix_path: sock, request: Oribi::Bench::Targets.get("/", keepalive: keepalive), connections: 1,
                     threads: 1, requests: requests, keepalive: keepalive, timeout: 60)
end

def accepting?(sock)
  UNIXSocket.new(sock).close
  true
rescue SystemCallError
  false
end

def measure(root, requests, keepalive)
  Dir.mktmpdir("oribi-callgrind") do |dir|
    sock = File.join(dir, "s.sock")
    out = File.join(dir, "callgrind.out")
    pid = Process.spawn("valgrind", "--tool=callgrind", "--callgrind-out-file=#{out}", *TOGGLE, RbConfig.ruby,
                        "-I#{root}/lib", "#{root}/exe/oribi", "-w", "0", "-b", "unix://#{sock}", APP,
                        %i[out err] => File.join(dir, "log"), pgroup: true)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 120
    until accepting?(sock)
      raise "no server under valgrind in 120 s:\n#{File.read(File.join(dir, 'log'))}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.2 # polling a condition (valgrind's start is slow), bounded above
    end
    load(sock, 300, keepalive)
    system("callgrind_control", "-z", pid.to_s, %i[out err] => File::NULL) or raise "callgrind_control -z failed"
    res = load(sock, requests, keepalive)
    raise "#{res[:errors]} errors" unless res[:requests] == requests && res[:errors].values.sum.zero?

    system("callgrind_control", "-d", pid.to_s, %i[out err] => File::NULL) or raise "callgrind_control -d failed"
    dump = Dir["#{out}*"].max_by { |f| File.mtime(f) }
    total = File.foreach(dump).find { |l| l.start_with?("summary:", "totals:") }.split[1].to_i
    # ORIBI_CALLGRIND_KEEP=DIR keeps each dump, for callgrind_annotate
    if (keep = ENV["ORIBI_CALLGRIND_KEEP"])
      FileUtils.cp(dump, File.join(keep, "#{File.basename(root)}-#{keepalive ? 'keepalive' : 'close'}-#{Time.now.to_f}.out"))
    end
    total.fdiv(requests)
  ensure
    if pid
      Process.kill(:KILL, -pid) rescue nil # rubocop:disable Style/RescueModifier
      Process.wait(pid) rescue nil # rubocop:disable Style/RescueModifier
    end
  end
end

puts format("%-40s %14s %14s", "instructions per request (engine)", "keep-alive", "close")
roots.each do |root|
  # The minimum: what varies between runs is work added by timing (a wait
  # that found nothing, a timer, a GC run), never work taken away.
  ka = Array.new(repeat) { measure(root, requests, true) }.min
  close = Array.new(repeat) { measure(root, requests, false) }.min
  puts format("%-40s %14.0f %14.0f", root.size > 40 ? "…#{root[-39..]}" : root, ka, close)
end
