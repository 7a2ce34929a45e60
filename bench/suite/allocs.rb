# frozen_string_literal: true

require "fileutils"
require "io/wait"
require "socket"
require_relative "process_group"

module Bench
  module Suite
    # Objects allocated per request (GC.stat in the one worker, read through
    # bench/apps/alloc.ru before and after N requests on one connection) and,
    # when strace is installed, syscalls per request in that worker.
    class Allocs
      APP = File.join(APPS, "alloc.ru")

      def initialize(tmp:, requests:, strace:, out: $stdout, err: $stderr)
        @err = err
        @tmp = tmp
        @n = requests
        @strace = strace && system("strace", "-V", %i[out err] => File::NULL)
        @out = out
      end

      # [{ server:, workload:, mode:, allocs:, syscalls: }]
      def run(servers, workloads)
        todo = servers.reject(&:ceiling?).product(workloads)
        todo.each_with_index.flat_map do |(server, w), i|
          @err.puts "[allocs #{i + 1}/#{todo.size}] #{w.name} #{server.name}"
          measure(server, w)
        rescue StandardError => e # one server's failure is a missing row, not a lost run
          @out.puts "allocs: #{server.name} #{w.name}: #{e.class}: #{e.message}"
          []
        end
      end

      private

      def measure(server, workload)
        unix = server.unix ? File.join(@tmp, "alloc-#{server.name}.sock") : nil
        port = unix ? nil : TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
        target = unix ? { unix_path: unix } : { host: "127.0.0.1", port: port }
        argv = server.argv.call(@tmp, 1, unix, port, APP, workload.name)
        group = ProcessGroup.new(argv, env: { "RACK_ENV" => "production", "BENCH_APP" => workload.app },
                                       log: File.join(@tmp, "alloc-#{server.name}.log"), chdir: ROOT)
        if (failed = group.wait_ready(target, workload.probe("localhost")))
          @out.puts "allocs: #{server.name} #{workload.name}: #{failed}"
          return []
        end
        MODES.map do |mode|
          keepalive = mode == "keep-alive"
          req = workload.request("localhost", keepalive: keepalive)
          Oribi::Loadgen.run(target.merge(request: req, connections: 1, threads: 1, requests: 200,
                                          keepalive: keepalive)) # warm caches, JIT-free paths
          pid, a0 = read(target)
          _, a1 = read(target)
          probe = a1 - a0 # what one probe costs
          _, b0 = read(target)
          calls = traced(pid) do
            Oribi::Loadgen.run(target.merge(request: req, connections: 1, threads: 1, requests: @n,
                                            keepalive: keepalive))
          end
          _, b1 = read(target)
          { server: server.name, workload: workload.name, mode: mode,
            allocs: (b1 - b0 - probe).fdiv(@n), syscalls: calls&.fdiv(@n) }
        end
      ensure
        group&.stop
        FileUtils.rm_f(unix) if unix
      end

      # [pid, total_allocated_objects] of the worker that answered.
      def read(target)
        sock = target[:unix_path] ? UNIXSocket.new(target[:unix_path]) : TCPSocket.new(target[:host], target[:port])
        sock.write("GET /__alloc HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        reply = +""
        until (m = reply.match(/^(\d+) (\d+)\r?$/))
          raise "no /__alloc answer" unless sock.wait_readable(10)

          chunk = sock.read_nonblock(4096, exception: false)
          raise "no /__alloc answer" if chunk.nil?

          reply << chunk if chunk.is_a?(String)
        end
        [m[1].to_i, m[2].to_i]
      ensure
        sock&.close
      end

      # Syscalls made by every thread of pid while the block runs (strace -c),
      # or nil without strace.
      def traced(pid)
        return yield.then { nil } unless @strace && pid

        log = File.join(@tmp, "strace-#{pid}.txt")
        tids = Dir.children("/proc/#{pid}/task")
        st = Process.spawn("strace", "-c", "-f", "-o", log, *tids.flat_map { |t| ["-p", t] },
                           err: File::NULL, out: File::NULL)
        sleep 0.5 # attach
        yield
        Process.kill(:INT, st)
        Process.wait(st)
        # "100.00  seconds  usecs/call  calls  [errors]  total"
        File.read(log).lines.grep(/\stotal\s*$/).first&.split&.at(3)&.to_i
      end
    end
  end
end
