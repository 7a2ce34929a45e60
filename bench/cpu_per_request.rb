# frozen_string_literal: true

# Server CPU per request: Oribi (2 workers, hello world) against nginx's
# `return 200` (2 workers, the same body), both on unix sockets, loaded by
# Oribi::Loadgen with 50 connections, keep-alive and a connection per
# request. The CPU is each server's whole process group from /proc, divided
# by the requests it served, beside the context switches of all its threads
# per request and the rescheduling interrupts (one CPU telling another to
# run a task it woke; in a VM an exit to the hypervisor on each side) the
# whole machine took per request. It also prints the workers' RSS after the
# runs. With --split (needs perf) one more keep-alive slice per server runs
# under `perf record`, and its CPU per request is split by where the samples
# fell: the kernel, the Ruby VM, libc, the server's own code.
#
#   bundle exec rake compile
#   bundle exec ruby bench/cpu_per_request.rb [--slices 8] [--slice 1.5] [--split] [--oribi-root DIR]...
#
# The servers run side by side and take turns under load in short slices
# (oribi, nginx, oribi, nginx, ...): on a shared machine a neighbour's burst
# then weighs on slices next to each other alike, and the ratio printed is
# the median of the ratios of adjacent slices, with their spread. Several
# --oribi-root give several Oribi trees in the same run (before and after
# a change), each against the same nginx.
require_relative "compare"

module Bench
  class CpuPerRequest
    ROOT = Compare::ROOT
    APP = Compare::APP
    MODES = Compare::MODES
    Options = Struct.new(:slices, :slice, :connections, :threads, :roots, :split, keyword_init: true)
    # perf's object names, grouped the way the split is printed
    PLACES = [["kernel", /\A\[kernel/], ["Ruby VM", /libruby/], ["libc", /\Alibc[.-]/], ["oribi.so", /\Aoribi\.so\z/],
              ["nginx", /\Anginx\z/]].freeze

    def initialize(opts)
      @o = opts
      @tmp = Dir.mktmpdir("oribi-cpu-", "/tmp")
    end

    def run
      abort "nginx is not installed" unless Suite::Nginx.available?
      servers = boot
      puts "#{@o.threads} loadgen threads, #{@o.connections} connections, unix sockets, " \
           "#{@o.slices} slices of #{@o.slice}s per server and mode"
      MODES.each { |mode, keepalive| measure(servers, mode, keepalive) }
      split(servers) if @o.split
      print_rss(servers)
    ensure
      servers&.each_value { |s| s[:group].stop }
      FileUtils.rm_rf(@tmp)
    end

    private

    # { label => { group:, path: } }, every server answering.
    def boot
      servers = {}
      @o.roots.each_with_index do |root, i|
        label = @o.roots.size == 1 ? "oribi" : "oribi#{i + 1}"
        path = File.join(@tmp, "#{label}.sock")
        argv = %W[bundle exec ruby #{File.join(root, 'exe', 'oribi')} -w 2 -b unix://#{path} #{APP}]
        env = { "RACK_ENV" => "production", "BUNDLE_GEMFILE" => File.join(root, "Gemfile") }
        servers[label] = start(argv, env, root, path, label)
        puts "#{label}: #{root}"
      end
      path = File.join(@tmp, "nginx.sock")
      servers["nginx"] = start(Suite::Nginx.return200_argv(@tmp, 2, path, nil), {}, ROOT, path, "nginx")
      servers
    end

    def start(argv, env, chdir, path, label)
      group = Suite::ProcessGroup.new(argv, env: env, log: File.join(@tmp, "#{label}.log"), chdir: chdir)
      failed = group.wait_ready({ unix_path: path }, Oribi::Bench::Targets.get("/", keepalive: false))
      abort "#{label} did not start: #{failed}\n#{group.tail.join}" if failed
      { group: group, path: path }
    end

    def measure(servers, mode, keepalive)
      per_req = Hash.new { |h, k| h[k] = [] } # label => [[cpu s, switches, IPIs] per request, one per slice]
      servers.each_key { |label| slice(servers[label], keepalive, 0.5) } # warm-up
      @o.slices.times do
        servers.each { |label, s| per_req[label] << slice(s, keepalive, @o.slice) }
      end
      puts "\n#{mode}:"
      servers.each_key do |label|
        v = per_req[label].compact
        puts format("  %-8s %6.2f us/request, %.2f context switches and %.2f rescheduling interrupts/request " \
                    "(medians of %d slices)", label, median(v.map { _1[0] }) * 1e6, median(v.map { _1[1] }),
                    median(v.map { _1[2] }), v.size)
      end
      servers.each_key do |label|
        next if label == "nginx"

        ratios = per_req[label].zip(per_req["nginx"]).filter_map { |a, b| a[0] / b[0] if a && b }
        puts format("  %-8s / nginx: %.2f (slices %.2f..%.2f)", label, median(ratios), ratios.min, ratios.max)
      end
    end

    # One keep-alive slice per server under perf: its CPU per request, split
    # by the object each sample ran in.
    def split(servers)
      return puts("\n--split needs perf (apt-get install linux-perf)") unless system("perf --version > /dev/null 2>&1")

      puts "\nkeep-alive, where the CPU went (us/request, one slice under perf record):"
      puts format("  %-8s %7s %s", "", "total", PLACES.map { |name, _| format("%9s", name) }.join + "     other")
      servers.each do |label, s|
        data = File.join(@tmp, "#{label}.perf")
        rec = Process.spawn("perf", "record", "-q", "-e", "cpu-clock", "-o", data, "-p", s[:group].stats.keys.join(","),
                            %i[out err] => File::NULL)
        per_req, = slice(s, true, @o.slice)
        Process.kill(:INT, rec)
        Process.wait(rec)
        shares = perf_shares(data)
        cells = PLACES.map { |name, _| format("%9.2f", (shares.delete(name) || 0) * per_req * 1e6) }
        puts format("  %-8s %7.2f %s %9.2f", label, per_req * 1e6, cells.join, shares.values.sum * per_req * 1e6)
      end
    end

    # { place => share of the samples }, places as PLACES names them (any
    # other object under its own name).
    def perf_shares(data)
      out = IO.popen(["perf", "report", "-i", data, "--sort", "dso", "--stdio", "-q", "-g", "none"], err: File::NULL, &:read)
      out.each_line.with_object(Hash.new(0.0)) do |line, shares|
        next unless (m = line.match(/\A\s*([\d.]+)%\s+(\S+)/))

        place = PLACES.find { |_, re| m[2].match?(re) }&.first || m[2]
        shares[place] += m[1].to_f / 100
      end
    end

    # The mean RSS of the 2 processes that used the most CPU: the workers.
    def print_rss(servers)
      puts "\nRSS per worker after the runs:"
      servers.each do |label, s|
        workers = s[:group].stats.values.max_by(2) { |cpu, _| cpu }
        puts format("  %-8s %6.1f MiB", label, workers.sum { |_, rss| rss } / workers.size / 1_048_576.0)
      end
    end

    # [CPU seconds, context switches, rescheduling interrupts] per request
    # over one slice of load, nil when none came back.
    def slice(server, keepalive, seconds)
      before = cpu(server[:group])
      switched = switches(server[:group])
      ipis = rescheduling_interrupts
      r = Oribi::Loadgen.run(unix_path: server[:path], threads: @o.threads, connections: @o.connections,
                             duration: seconds, keepalive: keepalive, timeout: 10.0,
                             request: Oribi::Bench::Targets.get("/", keepalive: keepalive))
      ok = r[:status].sum { |code, n| code == 200 ? n : 0 }
      return nil unless ok.positive?

      [(cpu(server[:group]) - before) / ok, (switches(server[:group]) - switched).fdiv(ok),
       (rescheduling_interrupts - ipis).fdiv(ok)]
    end

    # The machine's rescheduling interrupts so far, all CPUs (Linux's RES
    # row in /proc/interrupts; 0 where there is none).
    def rescheduling_interrupts
      row = File.foreach("/proc/interrupts").find { |l| l.lstrip.start_with?("RES:") }
      row ? row.split[1..].take_while { |f| f.match?(/\A\d+\z/) }.sum(&:to_i) : 0
    rescue SystemCallError
      0
    end

    def cpu(group) = group.stats.sum { |_, (seconds, _)| seconds }

    # Context switches (voluntary and not) of every thread of the server's
    # processes so far: each is a wake-up or a preemption the CPU paid for.
    def switches(group)
      group.stats.keys.sum do |pid|
        Dir.glob("/proc/#{pid}/task/*/status").sum do |f|
          File.read(f).scan(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)/).sum { |(n)| n.to_i }
        rescue SystemCallError
          0
        end
      end
    end

    def median(values)
      s = values.sort
      s.empty? ? Float::NAN : s[s.size / 2]
    end
  end

  def self.cpu_per_request_main(argv)
    o = CpuPerRequest::Options.new(slices: 8, slice: 1.5, connections: 50, threads: 2, roots: [])
    OptionParser.new do |p|
      p.banner = "usage: bundle exec ruby bench/cpu_per_request.rb [options]"
      p.on("--slices N", Integer, "slices per server and mode (8)") { |v| o.slices = v }
      p.on("--slice SECONDS", Float, "length of a slice (1.5)") { |v| o.slice = v }
      p.on("--connections N", Integer, "load generator connections (50)") { |v| o.connections = v }
      p.on("--threads N", Integer, "load generator threads (2)") { |v| o.threads = v }
      p.on("--split", "also split keep-alive CPU per request by where it ran (perf)") { o.split = true }
      p.on("--oribi-root DIR", "a checkout whose exe/oribi to run; repeat to compare trees (this one)") do |v|
        o.roots << File.expand_path(v)
      end
    end.parse!(argv)
    o.roots = [CpuPerRequest::ROOT] if o.roots.empty?
    CpuPerRequest.new(o).run
  end
end

Bench.cpu_per_request_main(ARGV) if $PROGRAM_NAME == __FILE__
