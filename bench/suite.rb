# frozen_string_literal: true

# The comparison suite: Oribi against the Rack servers users would pick
# instead (and nginx `return 200` and a minimal C server as ceilings), on
# every workload, transport and mode; tables and an SVG plot written into
# BENCHMARKS.md. Each server gets 2 workers, one Ruby thread each.
#
#   BUNDLE_GEMFILE=bench/Gemfile bundle install          # the peers, once
#   bundle exec rake compile
#   BUNDLE_GEMFILE=bench/Gemfile bundle exec ruby bench/suite.rb [--repeat 3] [--duration 1.5]
#
# `--quick` for a minute's look; `--servers`, `--workloads`, `--transports`,
# `--modes` to pick. The time it will take is printed first; a progress line
# follows. Compare ratios within one run: the servers, nginx and the load
# generator share the machine.
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../oribi-bench/lib", __dir__))
require "oribi"
require "oribi/loadgen"
require "etc"
require "json"
require "optparse"
require "tmpdir"
require_relative "suite/runner"
require_relative "suite/allocs"
require_relative "suite/report"

module Bench
  module Suite
    DEFAULTS = {
      servers: SERVERS.map(&:name), workloads: WORKLOADS.map(&:name), transports: TRANSPORTS,
      modes: MODES, duration: 2.0, warmup: 0.5, repeat: 1, workers: 2, threads: 2,
      connections: 50, timeout: 10.0, allocs: true, alloc_requests: 2000,
      out: File.join(ROOT, "BENCHMARKS.md"), svg: File.join(ROOT, "bench", "results.svg"),
      json: nil, provisional: nil, pin: true
    }.freeze

    def self.parse(argv)
      o = DEFAULTS.dup
      OptionParser.new do |p|
        p.banner = "usage: BUNDLE_GEMFILE=bench/Gemfile bundle exec ruby bench/suite.rb [options]"
        p.on("--quick", "hello and sinatra, unix and tcp, 1 s runs, no allocation phase") do
          o.merge!(workloads: %w[hello sinatra], transports: %w[unix tcp], duration: 1.0,
                   warmup: 0.3, allocs: false)
        end
        p.on("--servers LIST", Array, "among #{SERVERS.map(&:name).join(',')} (all)") { |v| o[:servers] = v }
        p.on("--workloads LIST", Array, "among #{WORKLOADS.map(&:name).join(',')} (all)") { |v| o[:workloads] = v }
        p.on("--transports LIST", Array, "among #{TRANSPORTS.join(',')} (all)") { |v| o[:transports] = v }
        p.on("--modes LIST", Array, "among #{MODES.join(',')} (both)") { |v| o[:modes] = v }
        p.on("--duration SECONDS", Float, "measured seconds per run (2)") { |v| o[:duration] = v }
        p.on("--warmup SECONDS", Float, "discarded run before each cell (0.5)") { |v| o[:warmup] = v }
        p.on("--repeat N", Integer, "runs per cell; the median is reported (1)") { |v| o[:repeat] = v }
        p.on("--connections N", Integer, "load generator connections (50)") { |v| o[:connections] = v }
        p.on("--threads N", Integer, "load generator threads (2)") { |v| o[:threads] = v }
        p.on("--[no-]pin", "servers on half the CPUs, the load generator on the rest (on)") { |v| o[:pin] = v }
        p.on("--[no-]allocs", "objects and syscalls per request phase (on)") { |v| o[:allocs] = v }
        p.on("--out FILE", "markdown report (BENCHMARKS.md); - for stdout only") { |v| o[:out] = v }
        p.on("--svg FILE", "the plot (bench/results.svg)") { |v| o[:svg] = v }
        p.on("--json FILE", "also the raw runs") { |v| o[:json] = v }
        p.on("--provisional NOTE", "label the report as provisional, with NOTE") { |v| o[:provisional] = v }
      end.parse!(argv)
      o[:servers].each { |s| server(s) }
      o[:workloads].each { |w| workload(w) }
      (bad = (o[:transports] - TRANSPORTS).first) and raise OptionParser::InvalidArgument, "transport #{bad}"
      (bad = (o[:modes] - MODES).first) and raise OptionParser::InvalidArgument, "mode #{bad}"
      o
    end

    def self.main(argv)
      original = argv.dup
      o = parse(argv)
      if o[:pin]
        o[:server_cpus], o[:loadgen_cpus] = Pin.reexec!(File.expand_path(__FILE__), original)
        o[:pin] = !o[:server_cpus].nil?
        puts "one CPU or no taskset: servers and load generator share the CPUs" unless o[:pin]
      end
      Dir.mktmpdir("oribi-suite-", "/tmp") do |tmp|
        o[:tmpdir] = tmp
        unless Nginx.available?
          o[:servers] -= ["nginx"]
          o[:transports] -= ["nginx"]
          puts "nginx: not installed (apt-get install nginx): no nginx ceiling or proxied cells"
        end
        missing = o[:servers].map { |s| server(s) }.reject { |s| version(s) }
        missing.each { |s| puts "#{s.name}: not installed (BUNDLE_GEMFILE=bench/Gemfile bundle install)" }
        o[:servers] -= missing.map(&:name)
        runner = Runner.new(o)
        alloc_seconds = o[:allocs] ? o[:servers].size * 2 * 10 : 0
        est = runner.estimate + alloc_seconds
        puts format("suite: %d servers, %d workloads, %d cells, %d pass(es) of %.1fs runs%s: about %d min %02d s",
                    o[:servers].size, o[:workloads].size, runner.plan.sum { |*, c| c.size }, o[:repeat],
                    o[:duration], o[:pin] ? ", servers on CPU #{o[:server_cpus]}, load on CPU #{o[:loadgen_cpus]}" : "",
                    est / 60, est % 60)
        started = Time.now
        cells = runner.run
        allocs = if o[:allocs]
                   Allocs.new(tmp: tmp, requests: o[:alloc_requests], strace: true)
                         .run(o[:servers].map { |s| server(s) },
                              o[:workloads].select { |w| %w[hello sinatra].include?(w) }.map { |w| workload(w) })
                 else
                   []
                 end
        elapsed = Time.now - started
        md = markdown(o, cells, runner.unavailable, allocs, elapsed)
        File.write(o[:svg], Report.svg(cells, o[:servers], o[:workloads].map { |w| workload(w) })) if o[:svg] != "-"
        if o[:out] == "-"
          puts md
        else
          File.write(o[:out], md)
          puts Report.goals(cells)
          puts "wrote #{o[:out]}#{o[:svg] == '-' ? '' : " and #{o[:svg]}"} (#{(elapsed / 60).floor} min #{(elapsed % 60).round} s)"
        end
        File.write(o[:json], JSON.pretty_generate(cells: cells.map(&:to_h), allocs: allocs)) if o[:json]
      end
    end

    def self.machine
      cpu = File.read("/proc/cpuinfo")[/^model name\s*:\s*(.+)$/, 1] rescue "?" # rubocop:disable Style/RescueModifier
      kernel = `uname -sr`.strip
      "#{cpu}, #{Etc.sysconf(Etc::SC_NPROCESSORS_ONLN)} CPUs, #{kernel}, #{RUBY_DESCRIPTION}"
    end

    LIMIT_NOTE = "Where several servers reach about the same rate in a cell (the connection-per-request " \
                 "cells, most of all over TCP), the load generator is the limit there, not they: opening " \
                 "and closing connections costs it as much as a fast server. Their CPU µs/req still " \
                 "tells them apart; a ceiling below Oribi there is such a cell, not a faster Oribi."

    def self.cpus(o)
      return "The servers, nginx and the load generator share the machine's CPUs." unless o[:pin]

      "The servers and nginx run on CPU #{o[:server_cpus]}, the load generator on CPU " \
        "#{o[:loadgen_cpus]} (`taskset`; `--no-pin` to share them), as if the load came from " \
        "another machine: shared, the client's own cost per connection is paid from the " \
        "servers' CPU time and squeezes every ratio towards 1."
    end

    def self.markdown(o, cells, unavailable, allocs, elapsed)
      servers = o[:servers]
      workloads = o[:workloads].map { |w| workload(w) }
      cmd = "BUNDLE_GEMFILE=bench/Gemfile bundle exec ruby bench/suite.rb --repeat #{o[:repeat]} " \
            "--duration #{o[:duration]}"
      out = +"# Benchmarks\n\n"
      if o[:provisional]
        out << "> **Provisional.** #{o[:provisional]}\n\n"
      end
      out << <<~MD
        Written by `bench/suite.rb` on #{Time.now.utc.strftime('%Y-%m-%d %H:%M UTC')} in #{(elapsed / 60).round(1)} min.
        Machine: #{machine}.

        Each server: #{o[:workers]} worker processes, one Ruby thread each serving requests,
        `RACK_ENV=production`. Load: `Oribi::Loadgen` (C, closed loop), #{o[:threads]} threads,
        #{o[:connections]} connections, per-request timeout #{o[:timeout]} s; a #{o[:warmup]} s warm-up
        per cell is discarded, then #{o[:repeat]} run(s) of #{o[:duration]} s, one per pass over every
        server (each pass boots them again); the median is shown (errors: the sum).
        #{cpus(o)} Compare ratios within this run, not with other machines. "close" is a new
        connection per request (connect time in the latency); "nginx" is nginx in front
        (1 worker, upstream keep-alive to the server's unix socket), client keep-alive.
        RSS/worker: the mean RSS of the #{o[:workers]} processes that used the most CPU in the
        run. CPU µs/req: the server's whole process tree (and group), reaped children included.

        Reproduce:

            BUNDLE_GEMFILE=bench/Gemfile bundle install
            bundle exec rake compile
            #{cmd}

        ## Servers

        | server | version | notes |
        |---|---|---|
      MD
      SERVERS.each do |s|
        v = servers.include?(s.name) ? version(s) : nil
        note = unavailable[s.name] ? "#{s.note}; **failed**: #{unavailable[s.name].join('; ')}" : s.note.to_s
        note = "not in this run" if !servers.include?(s.name) && !unavailable[s.name]
        out << "| #{s.name} | #{v || '-'} | #{note.gsub('|', '\\|')} |\n"
      end
      if (rhebok = servers.include?("rhebok") && version(server("rhebok")))
        out << "\nRhebok #{rhebok} (2016) still installs and runs on Ruby #{RUBY_VERSION} with Rack 3, started through its handler class.\n"
      end
      out << "† the server cannot listen on a unix socket: that cell went over TCP.\n\n"
      out << "## Goals\n\n#{Report.goals(cells)}\n\n#{LIMIT_NOTE}\n\n" \
             "Where Oribi's time goes, and what was changed: [bench/PROFILE.md](bench/PROFILE.md).\n\n"
      out << "## Plot\n\n![requests per second](bench/results.svg)\n\n" if o[:svg] != "-"
      out << "## Results\n\n#{Report.tables(cells, servers, workloads)}\n"
      skipped = Report.skipped(cells)
      out << "\nNot run:\n#{skipped}\n" unless skipped.empty?
      unless allocs.empty?
        out << "\n## Objects and syscalls per request\n\n"
        out << "One worker; #{o[:alloc_requests]} requests on one connection (keep-alive) or one connection each\n"
        out << "(close); `GC.stat(:total_allocated_objects)` in the worker before and after (server and\n"
        out << "app together); syscalls: `strace -c -f` on every thread of the worker.\n\n"
        out << "| workload | mode | server | objects/req | syscalls/req |\n|---|---|---|---:|---:|\n"
        allocs.each do |a|
          out << format("| %s | %s | %s | %.1f | %s |\n", a[:workload], a[:mode], a[:server], a[:allocs],
                        a[:syscalls] ? format("%.1f", a[:syscalls]) : "-")
        end
      end
      out
    end
  end
end

Bench::Suite.main(ARGV) if $PROGRAM_NAME == __FILE__
