# frozen_string_literal: true

# The goals Oribi's handling of new and kept-alive connections is held to,
# each measured in one run and judged, against an earlier build of it and
# its peers on the same machine at the same time:
#
#   BUNDLE_GEMFILE=bench/Gemfile bundle exec ruby bench/goals.rb --old DIR
#       [--pin] [--flags --busy-poll=50] [--sections grid,wrk,burst,slow,seed,keepalive,pipelined,fairness]
#       [--connections 1,2,4,...,128] [--rounds 3] [--duration 1] [--noise 0.05] [--json FILE]
#
# DIR is another checkout built with `rake compile` (the build the grid must
# not fall behind: `git worktree add /tmp/old REV && (cd /tmp/old && bundle
# exec rake compile)`). Peers come from bench/Gemfile (Unicorn, Puma, Iodine)
# and bench/ceiling (the minimal C server, nginx `return 200`). Every server
# runs 2 workers x 1 thread; the clients are bench/late_writers.c's and wrk.
#
#   grid       a new connection per request, its bytes written at once, on
#              writability, or 1 ms after connect; unix socket, TCP, TCP
#              without TCP_DEFER_ACCEPT; each connection count: at least the
#              old build's rate, p99 at most 1.2x its; without
#              TCP_DEFER_ACCEPT also p50 at most 1.2x Unicorn's
#   wrk        the same goals with wrk (Connection: close) over TCP without
#              TCP_DEFER_ACCEPT
#   burst      50 keep-alive clients at once: no worker takes over 70%
#   slow       a 5 ms app, 4 connections, a new connection per request: p99
#              at most 15 ms (3x the app's time)
#   seed       hello, unix socket, 50 connections: at least 1.6x Unicorn and
#              0.9x the minimal C server, clients that write at once and on
#              writability
#   keepalive  kept alive, 50 connections: at least 3x Puma, 0.8x nginx; with
#              a thread per connection (late_writers.c) and with oribi bench's
#              event loops
#   pipelined  TechEmpower's plaintext and JSON tests, 16 requests deep: at
#              least Iodine's rate
#   fairness   bench/fairness.rb: p99 at most 1.25x Puma's, direct and behind
#              nginx, for kept-alive clients and new connections; a new
#              connection's p99 within one round of the kept-alive clients
#              (a round as they see it: their own p99 in the same run; 50
#              clients x 10 ms over 2 workers is 250 ms before any overhead)
#
# A shared 2-CPU machine moves a rate by several percent from run to run: a
# result within --noise of its bound is said "even", not failed. The exit
# status is 1 when a goal fails outright.
require_relative "late_writers"
require_relative "fairness"
require "json"

module Bench
  class Goals
    SECTIONS = %w[grid wrk burst slow seed keepalive pipelined fairness].freeze
    SLOW_MS = 5

    Verdict = Struct.new(:section, :goal, :value, :bound, :higher, keyword_init: true) do
      # :pass, :even (within noise of the bound) or :fail
      def state(noise)
        return :fail if value.nil? || value.nan?

        ok = higher ? value >= bound : value <= bound
        return :pass if ok

        near = higher ? value >= bound * (1 - noise) : value <= bound * (1 + noise)
        near ? :even : :fail
      end
    end

    def initialize(opts)
      @o = opts
      @verdicts = []
      @results = {}
    end

    def run
      puts "goals: #{@o[:sections].join(', ')}; old build #{@o[:old] || '(none)'}; " \
           "#{@o[:pin] ? 'servers and clients on their own CPUs' : 'servers and clients share the CPUs'}"
      @o[:sections].each { |s| send(s) }
      summary
    end

    private

    def late(servers:, listeners:, modes:, connections:, app: "hello.ru", target: "/", burst: nil, rounds: @o[:rounds],
             duration: @o[:duration])
      servers = servers.map { |s| s == "oribi" && @o[:flags] ? ["oribi=#{LateWriters::ROOT}", *@o[:flags]].join("+") : s }
      lw = LateWriters.new(servers: LateWriters.specs(servers), listeners: listeners, modes: modes,
                           connections: connections, duration: duration, rounds: rounds, app: app,
                           target: target, burst: burst, pin: @o[:pin])
      lw.run
      lw.results
    end

    def old = @o[:old] ? ["old=#{@o[:old]}"] : abort("--old DIR: the grid and wrk compare with an earlier build")

    def grid
      rows = late(servers: ["oribi", *old], listeners: %w[unix tcp], modes: %w[now writable 1ms],
                  connections: @o[:connections])
      rows += late(servers: ["oribi", *old, "unicorn"], listeners: %w[tcp-nodefer], modes: %w[now writable 1ms],
                   connections: @o[:connections])
      against_old("grid", rows)
    end

    def wrk
      rows = late(servers: ["oribi", *old, "unicorn"], listeners: %w[tcp-nodefer], modes: %w[wrk],
                  connections: @o[:connections].reject { |c| c > 64 })
      against_old("wrk", rows)
    end

    # Each cell: Oribi's rate against the old build's, its p99 against 1.2x
    # the old one's; without TCP_DEFER_ACCEPT its p50 against 1.2x Unicorn's.
    def against_old(section, rows)
      @results[section] = rows
      rows.group_by { |r| r.values_at(:kind, :mode, :conns) }.each do |(kind, mode, conns), cell|
        me, was, unicorn = %w[oribi old unicorn].map { |l| cell.find { |r| r[:label] == l } }
        name = "#{kind} #{mode} #{conns}c"
        judge(section, "#{name}: rate / old", me[:rate] / was[:rate], 1.0, higher: true)
        judge(section, "#{name}: p99 / old", me[:p99] / was[:p99], 1.2, higher: false)
        judge(section, "#{name}: p50 / unicorn", me[:p50] / unicorn[:p50], 1.2, higher: false) if unicorn
      end
    end

    def burst
      rows = late(servers: %w[oribi], listeners: %w[unix tcp], modes: %w[keepalive], connections: [1], burst: 50,
                  rounds: 12, duration: 1.0)
      @results["burst"] = rows
      rows.each do |r|
        shares = r[:pids].map { |p| p.split(",").map(&:to_i) }.map { |counts| counts.max.to_f / counts.sum }
        judge("burst", "#{r[:kind]}: the largest share of 50 clients, worst of #{shares.size} rounds",
              shares.max, 0.7, higher: false)
      end
    end

    def slow
      rows = late(servers: ["oribi", *(@o[:old] ? old : [])], listeners: %w[unix tcp tcp-nodefer], modes: %w[now],
                  connections: [4], app: "sleepy.ru", target: "/?ms=#{SLOW_MS}", duration: 3.0)
      @results["slow"] = rows
      rows.select { |r| r[:label] == "oribi" }.each do |r|
        judge("slow", "#{r[:kind]}: p99 ms of a #{SLOW_MS} ms app", r[:p99] / 1e3, 3.0 * SLOW_MS, higher: false)
      end
    end

    def seed
      rows = late(servers: %w[oribi unicorn minimal], listeners: %w[unix], modes: %w[now writable], connections: [50],
                  duration: 3.0)
      @results["seed"] = rows
      rows.group_by { |r| r[:mode] }.each do |mode, cell|
        me, unicorn, minimal = %w[oribi unicorn minimal].map { |l| cell.find { |r| r[:label] == l }[:rate] }
        judge("seed", "#{mode}: rate / unicorn", me / unicorn, 1.6, higher: true)
        judge("seed", "#{mode}: rate / minimal C", me / minimal, 0.9, higher: true)
      end
    end

    def keepalive
      rows = late(servers: %w[oribi puma nginx], listeners: %w[unix], modes: %w[keepalive bench], connections: [50],
                  duration: 3.0)
      @results["keepalive"] = rows
      rows.group_by { |r| r[:mode] }.each do |mode, cell|
        me, puma, nginx = %w[oribi puma nginx].map { |l| cell.find { |r| r[:label] == l }[:rate] }
        judge("keepalive", "#{mode}: rate / puma", me / puma, 3.0, higher: true)
        judge("keepalive", "#{mode}: rate / nginx return 200", me / nginx, 0.8, higher: true)
      end
    end

    def pipelined
      @results["pipelined"] = %w[/plaintext /json].flat_map do |target|
        rows = late(servers: %w[oribi iodine], listeners: %w[unix tcp], modes: %w[pipelined], connections: [16],
                    app: "techempower.ru", target: target, duration: 3.0)
        rows.group_by { |r| r[:kind] }.each do |kind, cell|
          me, iodine = %w[oribi iodine].map { |l| cell.find { |r| r[:label] == l }[:rate] }
          judge("pipelined", "#{target} #{kind}: rate / iodine", me / iodine, 1.0, higher: true)
        end
        rows.map { |r| r.merge(target: target) }
      end
    end

    def fairness
      med = Fairness.new(duration: 10.0, clients: 50, repeat: 1, servers: %w[oribi puma], via: %w[direct nginx]).run
      @results["fairness"] = med
      %w[direct nginx].each do |via|
        me = med["oribi #{via}"]
        puma = med["puma #{via}"]
        judge("fairness", "#{via}: kept-alive p99 / puma", me[:p99] / puma[:p99], 1.25, higher: false)
        judge("fairness", "#{via}: new connection p99 / puma", me[:first_p99] / puma[:first_p99], 1.25, higher: false)
        judge("fairness", "#{via}: new connection p99 / a kept-alive round (their p99)", me[:first_p99] / me[:p99],
              1.0, higher: false)
      end
    end

    def judge(section, goal, value, bound, higher:)
      @verdicts << Verdict.new(section: section, goal: goal, value: value, bound: bound, higher: higher)
    end

    def summary
      puts "\n#{'=' * 78}\nverdicts (noise allowance #{(@o[:noise] * 100).round} %)"
      counts = Hash.new(0)
      @verdicts.each do |v|
        state = v.state(@o[:noise])
        counts[state] += 1
        puts format("  %-5s %-9s %-58s %8.2f %s %.2f", state == :fail ? "FAIL" : state, v.section, v.goal,
                    v.value || Float::NAN, v.higher ? ">=" : "<=", v.bound)
      end
      puts "#{counts[:pass]} passed, #{counts[:even]} even (within noise), #{counts[:fail]} failed"
      if @o[:json]
        File.write(@o[:json], JSON.pretty_generate(
                                results: @results, pinned: @o[:pin],
                                verdicts: @verdicts.map { |v| v.to_h.merge(state: v.state(@o[:noise])) }
                              ))
      end
      counts[:fail].zero?
    end
  end

  def self.goals_main(argv)
    o = { old: nil, pin: false, sections: Goals::SECTIONS, connections: [1, 2, 4, 8, 16, 32, 64, 128], rounds: 3,
          duration: 1.0, noise: 0.05, json: nil }
    OptionParser.new do |p|
      p.banner = "usage: BUNDLE_GEMFILE=bench/Gemfile bundle exec ruby bench/goals.rb --old DIR [options]"
      p.on("--old DIR", "an earlier checkout, built with rake compile (required by grid and wrk)") do |v|
        o[:old] = File.expand_path(v)
      end
      p.on("--pin", "servers on the first half of the CPUs, clients on the rest (off)") { o[:pin] = true }
      p.on("--flags LIST", Array, "this checkout's oribi with these flags, e.g. --busy-poll=50 (none; not fairness)") do |v|
        o[:flags] = v
      end
      p.on("--sections LIST", Array, "of #{Goals::SECTIONS.join(',')} (all)") { |v| o[:sections] = v & Goals::SECTIONS }
      p.on("--connections LIST", Array, "the grid's connection counts (1,2,4,8,16,32,64,128)") do |v|
        o[:connections] = v.map(&:to_i)
      end
      p.on("--rounds N", Integer, "the grid's runs per server and cell, alternating (3)") { |v| o[:rounds] = v }
      p.on("--duration SECONDS", Float, "the grid's seconds per run (1)") { |v| o[:duration] = v }
      p.on("--noise FRACTION", Float, "a result this close to its bound is even, not failed (0.05)") do |v|
        o[:noise] = v
      end
      p.on("--json FILE", "every result and verdict as JSON") { |v| o[:json] = v }
    end.parse!(argv)
    exit(Goals.new(o).run ? 0 : 1)
  end
end

Bench.goals_main(ARGV) if $PROGRAM_NAME == __FILE__
