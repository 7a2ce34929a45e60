# frozen_string_literal: true

# Instructions per request in the worker's engine (Oribi::Engine's
# next_request and respond, with all they call), user space, counted by
# callgrind: hello world on a unix socket, one process (-w 0), keep-alive and a
# connection per request, for one or more checkouts (before and after a
# change). Counts do not depend on the machine's load, so this runs on a
# shared machine where a timed benchmark would not.
#
#   bundle exec ruby bench/instructions.rb [--requests 2000] [--repeat 3] [--rate 100] [--root DIR]...
#       [--json FILE]
#
# Each DIR is a checkout with its extension built (default: this one). Per
# run, one server, for each mode in turn: 300 requests to warm up, the
# counters zeroed (callgrind_control -z), N requests, the counters dumped
# (-d); the dump's total over N is the run's count. Printed: each cell's
# median over the runs, its range, and the ratio to the first DIR's median;
# --json writes the first DIR's medians ({"keep-alive": N, "close": N}),
# for bench/gate.rb.
#
# What would make the count follow timing is kept out, so that two runs of
# one tree agree within about 1%: the requests come one at a time at a
# fixed rate, each to a server idle in its wait (back to back, whether the
# next one is already there when the loop looks varies the loop's turns);
# GC is off (where its sweeping lands is timing; the trees compared
# allocate the same); and Ruby's own work around the wait is not counted
# (TOGGLE).
require "json"
require "optparse"
require "rbconfig"
require "socket"
require "tmpdir"
require "fileutils"
require_relative "../oribi-bench/lib/oribi/loadgen"
require_relative "../oribi-bench/lib/oribi/bench"

roots = []
json = nil
requests = 2000
repeat = 3
rate = 100
OptionParser.new do |o|
  o.on("--requests N", Integer, "requests counted per run (default #{requests})") { |v| requests = v }
  o.on("--repeat N", Integer, "runs per cell (default #{repeat})") { |v| repeat = v }
  o.on("--rate N", Integer, "requests per second, one at a time (default #{rate})") { |v| rate = v }
  o.on("--root DIR", "a checkout to measure (repeatable; default this one)") { |v| roots << File.expand_path(v) }
  o.on("--json FILE", "also write the first checkout's medians") { |v| json = v }
end.parse!
roots << File.expand_path("..", __dir__) if roots.empty?
abort "instructions: valgrind is not installed" unless system("which valgrind callgrind_control > /dev/null")
APP = File.expand_path("apps/hello.ru", __dir__)
# The engine's two calls per request (the loop, the env, the response
# written) and what they call: not the app. Nor Ruby's handing over of the GVL
# around the loop's wait: its work depends on how long the wait was and
# on Ruby's own timer, and it is Ruby's, the same for any engine. Each
# function toggles counting on entry and exit, so the one Ruby runs
# without the GVL turns it back on inside the call that hands the GVL over.
MODES = { "keep-alive" => true, "close" => false }.freeze
TOGGLE = %w[engine_next_request engine_respond rb_thread_call_without_gvl run_nogvl wait_nogvl]
         .map { |f| "--toggle-collect=#{f}" }.freeze

def load(sock, requests, keepalive, rate)
  Oribi::Loadgen.run(unix_path: sock, request: Oribi::Bench::Targets.get("/", keepalive: keepalive), connections: 1,
                     threads: 1, requests: requests, keepalive: keepalive, timeout: 60, rate: rate.to_f,
                     max_connections: 1)
end

def accepting?(sock)
  UNIXSocket.new(sock).close
  true
rescue SystemCallError
  false
end

# One server under callgrind, each mode measured in turn: {mode => count}
def measure(root, requests, rate)
  Dir.mktmpdir("oribi-callgrind") do |dir|
    sock = File.join(dir, "s.sock")
    out = File.join(dir, "callgrind.out")
    # No GC: where its sweeping lands (in the engine or in the app) is
    # timing; the two trees allocate the same objects per request.
    File.write(gc_off = File.join(dir, "gc_off.rb"), "GC.disable\n")
    pid = Process.spawn("valgrind", "--tool=callgrind", "--callgrind-out-file=#{out}", *TOGGLE, RbConfig.ruby,
                        "-r#{gc_off}", "-I#{root}/lib", "#{root}/exe/oribi", "-w", "0", "-b", "unix://#{sock}", APP,
                        %i[out err] => File.join(dir, "log"), pgroup: true)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 120
    until accepting?(sock)
      raise "no server under valgrind in 120 s:\n#{File.read(File.join(dir, 'log'))}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.2 # polling a condition (valgrind's start is slow), bounded above
    end
    MODES.to_h do |mode, keepalive|
      load(sock, 300, keepalive, rate)
      system("callgrind_control", "-z", pid.to_s, %i[out err] => File::NULL) or raise "callgrind_control -z failed"
      res = load(sock, requests, keepalive, rate)
      raise "#{res[:errors]} errors" unless res[:requests] == requests && res[:errors].values.sum.zero?

      before = Dir["#{out}*"]
      system("callgrind_control", "-d", pid.to_s, %i[out err] => File::NULL) or raise "callgrind_control -d failed"
      dump = (Dir["#{out}*"] - before).first or raise "callgrind_control -d wrote no dump"
      total = File.foreach(dump).find { |l| l.start_with?("summary:", "totals:") }.split[1].to_i
      # ORIBI_CALLGRIND_KEEP=DIR keeps each dump, for callgrind_annotate
      if (keep = ENV["ORIBI_CALLGRIND_KEEP"])
        FileUtils.cp(dump, File.join(keep, "#{File.basename(root)}-#{keepalive ? 'keepalive' : 'close'}-#{Time.now.to_f}.out"))
      end
      [mode, total.fdiv(requests)]
    end
  ensure
    if pid
      Process.kill(:KILL, -pid) rescue nil # rubocop:disable Style/RescueModifier
      Process.wait(pid) rescue nil # rubocop:disable Style/RescueModifier
    end
  end
end

# Runs alternate between the trees, so that a change on the machine
# during the measurement falls on all of them.
counts = Hash.new { |h, k| h[k] = [] }
repeat.times do |pass|
  roots.each do |root|
    measure(root, requests, rate).each do |mode, count|
      counts[[root, mode]] << count
      warn format("pass %d/%d  %-10s %-40s %8.0f", pass + 1, repeat, mode, root[-40..] || root, count)
    end
  end
end

def median(runs) = runs.sort[runs.size / 2]

def cell(runs, base)
  text = format("%.0f (%.0f–%.0f)", median(runs), runs.min, runs.max)
  base ? format("%s %.3f×", text, median(runs) / base) : text
end

medians = MODES.keys.to_h { |mode| [mode, median(counts[[roots.first, mode]])] }
File.write(json, "#{JSON.generate(medians)}\n") if json
puts format("%-40s %-30s %-30s", "instructions per request (engine)", *MODES.keys)
roots.each do |root|
  cells = MODES.keys.map { |mode| cell(counts[[root, mode]], root == roots.first ? nil : medians[mode]) }
  puts format("%-40s %-30s %-30s", root.size > 40 ? "…#{root[-39..]}" : root, *cells)
end
