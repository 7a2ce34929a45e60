# frozen_string_literal: true

require "fileutils"
require "socket"
require_relative "servers"
require_relative "workloads"
require_relative "nginx"
require_relative "process_group"
require_relative "../pin"

module Bench
  module Suite
    # One measured cell: a server serving a workload over a transport in a
    # mode. via_tcp: the server cannot listen on a unix socket, so this
    # unix (or nginx upstream) cell went over TCP.
    Cell = Struct.new(:workload, :transport, :mode, :server, :via_tcp, :runs, :skip,
                      keyword_init: true) do
      def key = [workload, transport, mode]
      def keepalive? = mode == "keep-alive"
    end

    # Boots each server once per workload (once per transport when it can
    # listen only once), runs every cell against it, and stops it.
    class Runner
      SETUP_SECONDS = 4.0 # boot, readiness and stop, for the estimate

      attr_reader :unavailable

      def initialize(opts, out: $stdout, err: $stderr)
        @o = opts
        @out = out
        @err = err
        @tmp = opts[:tmpdir]
        @cells = []
        @unavailable = {} # server name => why, for each workload it failed on
      end

      # The cells to run, in order, grouped by boot: [[server, workload,
      # {unix:, tcp:}, [cells]]].
      def plan
        @plan ||= @o[:workloads].flat_map do |wname|
          @o[:servers].filter_map do |sname|
            server = Suite.server(sname)
            next unless server.serves?(wname)

            cells = @o[:transports].product(@o[:modes]).map do |t, m|
              skip = skip_reason(server, t, m)
              Cell.new(workload: wname, transport: t, mode: m, server: sname, runs: [],
                       via_tcp: !server.unix && t != "tcp", skip: skip)
            end
            @cells.concat(cells)
            boots(server, cells.reject(&:skip)).map { |listen, cs| [server, wname, listen, cs] }
          end.flatten(1)
        end
      end

      def skip_reason(server, transport, mode)
        return nil unless transport == "nginx"
        return "nginx in front of nginx" if server.name == "nginx"
        return "the client's connection to nginx does not reach the server (upstream keep-alive either way)" if mode == "close"

        nil
      end

      # How a server listens for its cells: both sockets in one boot when it
      # can, else one boot per kind of socket.
      def boots(server, cells)
        return [] if cells.empty?

        need_unix = server.unix && cells.any? { |c| c.transport != "tcp" }
        need_tcp = !server.unix || cells.any? { |c| c.transport == "tcp" }
        if server.multi || !(need_unix && need_tcp)
          [[{ unix: need_unix, tcp: need_tcp }, cells]]
        else
          [[{ unix: true, tcp: false }, cells.reject { |c| c.transport == "tcp" }],
           [{ unix: false, tcp: true }, cells.select { |c| c.transport == "tcp" }]]
        end
      end

      # Every cell is measured once per pass, and each pass boots every
      # server again: a drift of the machine over the run (a noisy neighbour,
      # the clock) falls on every server alike instead of on whichever ran
      # at the time, and the median of the passes is reported.
      def per_cell_seconds = @o[:repeat] * (@o[:warmup] + @o[:duration] + 0.1)

      def estimate
        plan.sum { |_, _, _, cells| @o[:repeat] * SETUP_SECONDS + cells.size * per_cell_seconds }
      end

      def run
        total = plan.sum { |_, _, _, cs| cs.size } * @o[:repeat]
        @started = now
        @estimate = estimate
        done = 0
        @o[:repeat].times do |pass|
          plan.each do |server, wname, listen, cells|
            left = cells.reject(&:skip)
            done += cells.size - left.size
            next if left.empty?

            run_boot(server, Suite.workload(wname), listen, left) do |cell|
              done += 1
              progress(done, total, cell, pass)
            end
          end
        end
        @err.write("\r\e[K") if @err.tty?
        @cells
      end

      private

      def run_boot(server, workload, listen, cells, &on_cell)
        unix = listen[:unix] ? File.join(@tmp, "#{server.name}.sock") : nil
        port = listen[:tcp] ? free_port : nil
        log = File.join(@tmp, "#{server.name}-#{workload.name}.log")
        argv = server.argv.call(@tmp, @o[:workers], unix, port, workload.app, workload.name)
        group = ProcessGroup.new(Pin.argv(@o[:server_cpus], argv), env: { "RACK_ENV" => "production" },
                                 log: log, chdir: ROOT)
        proxy = nil
        begin
          target = unix ? { unix_path: unix } : { host: "127.0.0.1", port: port }
          failed = group.wait_ready(target, workload.probe("localhost"))
          if failed
            why = "#{workload.name}: #{failed}: #{group.tail(2).join(' | ').strip[0, 300]}"
            note_unavailable(server, why)
            @out.puts "#{server.name}: not available (#{why})"
            cells.each do |c|
              c.skip = "#{server.name} not available"
              on_cell.call(c)
            end
            return
          end
          crashed = nil
          cells.each do |cell|
            if crashed
              cell.skip = crashed
              on_cell.call(cell)
              next
            end
            if cell.transport == "nginx"
              proxy ||= start_proxy(unix ? "unix:#{unix}" : "127.0.0.1:#{port}", workload)
              t = proxy ? { host: "127.0.0.1", port: @proxy_port } : nil
              cell.skip = "nginx proxy did not start" unless t
            else
              t = cell.transport == "tcp" || !unix ? { host: "127.0.0.1", port: port } : { unix_path: unix }
            end
            measure(cell, t, workload, group) if t
            if group.exited?
              crashed = "#{server.name} died during #{workload.name} #{cell.transport} #{cell.mode}"
              why = File.foreach(log).find { |l| l.include?("[BUG]") } || group.tail(1).join
              note_unavailable(server, "#{crashed}: #{why.strip[0, 200]}")
              @out.puts "#{crashed} (log: #{log})"
            end
            on_cell.call(cell)
          end
        ensure
          proxy&.stop
          group.stop
          FileUtils.rm_f(unix) if unix
        end
      end

      # Once per server and reason, though every pass may meet it again.
      def note_unavailable(server, why)
        list = (@unavailable[server.name] ||= [])
        list << why unless list.include?(why)
      end

      def start_proxy(upstream, workload)
        @proxy_port = free_port
        dir = File.join(@tmp, "nginx-proxy")
        FileUtils.mkdir_p(dir)
        argv = Pin.argv(@o[:server_cpus], Nginx.proxy_argv(dir, 1, @proxy_port, upstream))
        proxy = ProcessGroup.new(argv, env: {}, log: File.join(dir, "out.log"), chdir: dir)
        failed = proxy.wait_ready({ host: "127.0.0.1", port: @proxy_port }, workload.probe("localhost"), timeout: 10)
        return proxy unless failed

        errors = File.join(dir, "nginx-error.log")
        @out.puts "nginx proxy to #{upstream}: #{failed}: #{File.exist?(errors) ? File.readlines(errors).last(2).join(' | ') : ''}"
        proxy.stop
        nil
      end

      def measure(cell, target, workload, group)
        host = target[:port] ? "127.0.0.1:#{target[:port]}" : "localhost"
        request = workload.request(host, keepalive: cell.keepalive?)
        load(target, request, cell.keepalive?, @o[:warmup]) if @o[:warmup].positive?
        before = group.stats
        r = load(target, request, cell.keepalive?, @o[:duration])
        after = group.stats
        cell.runs << summarize(r, before, after)
      end

      def load(target, request, keepalive, duration)
        Oribi::Loadgen.run(target.merge(request: request, threads: @o[:threads],
                                        connections: @o[:connections], duration: duration,
                                        keepalive: keepalive, timeout: @o[:timeout]))
      end

      # The numbers kept from one run. RSS per worker: the mean RSS of the
      # WORKERS processes of the group that used the most CPU during the run
      # (the ones serving: not a master, mold or supervisor).
      def summarize(r, before, after)
        used = after.map { |pid, (cpu, rss)| [cpu - (before[pid]&.first || 0), rss] }
        busy = used.sort_by { |cpu, _| -cpu }.first(@o[:workers])
        bad = r[:status].sum { |code, n| code >= 200 && code < 400 ? 0 : n }
        {
          rate: r[:requests] / r[:elapsed],
          p50: r[:latency][:p50], p99: r[:latency][:p99],
          errors: r[:errors].values.sum + bad,
          rss: busy.empty? ? nil : busy.sum { |_, rss| rss } / busy.size,
          cpu_us: r[:requests].positive? ? used.sum { |cpu, _| cpu } * 1e6 / r[:requests] : nil
        }
      end

      def progress(done, total, cell, pass)
        spent = now - @started
        left = [@estimate - spent, 0].max
        line = format("[%d/%d] pass %d/%d %s %s %s %-9s  %s elapsed, ~%s left", done, total, pass + 1,
                      @o[:repeat], cell.workload, cell.transport, cell.mode, cell.server, clock(spent), clock(left))
        if @err.tty?
          @err.write("\r\e[K#{line}")
        else
          @err.puts(line)
        end
      end

      def clock(s) = format("%d:%02d", s / 60, s % 60)

      def free_port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }

      def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
