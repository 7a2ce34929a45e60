# frozen_string_literal: true

# `oribi bench` next to wrk, in one run, against the same nginx `return 200`:
#
#   ruby bench/loadgen_vs_wrk.rb [-t 2] [-c 50] [-d 10] [--rounds 3]
#
# Starts nginx (from PATH) on a loopback TCP port and a unix socket, then
# for each round runs wrk and oribi bench over TCP and oribi bench over the
# unix socket (wrk has none), the same threads and connections each time,
# alternating so drift hits all three alike. Prints requests/s per round,
# the best of each, and the ratios.
require "optparse"
require "tmpdir"
require "json"
require "socket"
require "open3"
require "etc"

def listening?(port)
  TCPSocket.new("127.0.0.1", port).close
  true
rescue SystemCallError
  false
end

ROOT = File.expand_path("..", __dir__)
opts = { threads: 2, connections: 50, duration: 10, rounds: 3 }
OptionParser.new do |o|
  o.on("-t N", Integer) { |v| opts[:threads] = v }
  o.on("-c N", Integer) { |v| opts[:connections] = v }
  o.on("-d SECONDS", Integer) { |v| opts[:duration] = v }
  o.on("--rounds N", Integer) { |v| opts[:rounds] = v }
end.parse!

%w[nginx wrk].each do |tool|
  abort "#{tool} not found in PATH" unless system("command -v #{tool} >/dev/null")
end

Dir.mktmpdir("oribi-vs-wrk") do |dir|
  port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
  sock = File.join(dir, "nginx.sock")
  File.write(File.join(dir, "nginx.conf"), <<~CONF)
    worker_processes 2;
    pid #{dir}/nginx.pid;
    error_log #{dir}/error.log;
    daemon off;
    events { worker_connections 4096; }
    http {
      access_log off;
      client_body_temp_path #{dir}; proxy_temp_path #{dir}; fastcgi_temp_path #{dir};
      uwsgi_temp_path #{dir}; scgi_temp_path #{dir};
      server {
        listen 127.0.0.1:#{port} backlog=4096;
        listen unix:#{sock} backlog=4096;
        location / { return 200 "hello\\n"; }
      }
    }
  CONF
  nginx = Process.spawn("nginx", "-c", File.join(dir, "nginx.conf"), "-p", dir,
                        %i[out err] => File.join(dir, "nginx.out"))
  begin
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    until File.socket?(sock) && listening?(port)
      abort "nginx did not start: #{File.read(File.join(dir, 'nginx.out'))}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      sleep 0.05 # polling for the listener; nothing to wait on
    end

    t, c, d = opts.values_at(:threads, :connections, :duration)
    url = "http://127.0.0.1:#{port}/"
    runs = {
      "wrk tcp" => lambda {
        out, = Open3.capture2e("wrk", "-t#{t}", "-c#{c}", "-d#{d}s", url)
        out[%r{Requests/sec:\s+([\d.]+)}, 1].to_f.tap { |r| abort "wrk: #{out}" if r.zero? }
      },
      "oribi tcp" => lambda {
        out, = Open3.capture2(RbConfig.ruby, File.join(ROOT, "exe/oribi"), "bench", "-T", t.to_s,
                              "-c", c.to_s, "-d", "#{d}s", "--json", url)
        j = JSON.parse(out)
        abort "oribi bench: errors #{j['errors']}" unless j["errors"].empty?
        j["rate"]
      },
      "oribi unix" => lambda {
        out, = Open3.capture2(RbConfig.ruby, File.join(ROOT, "exe/oribi"), "bench", "-T", t.to_s,
                              "-c", c.to_s, "-d", "#{d}s", "--json", "--unix-socket", sock, "http://localhost/")
        j = JSON.parse(out)
        abort "oribi bench: errors #{j['errors']}" unless j["errors"].empty?
        j["rate"]
      }
    }
    puts "nginx return 200; -t #{t} -c #{c} -d #{d}s; #{Etc.nprocessors} CPUs shared with nginx"
    results = Hash.new { |h, k| h[k] = [] }
    opts[:rounds].times do |i|
      line = runs.map do |name, run|
        results[name] << run.call
        format("%s %.0f", name, results[name].last)
      end
      puts "round #{i + 1}: #{line.join('  ')} req/s"
    end
    best = results.transform_values(&:max)
    puts
    best.each { |name, r| puts format("%-11s best %10.0f req/s", name, r) }
    puts format("oribi tcp / wrk tcp:    %.3f", best["oribi tcp"] / best["wrk tcp"])
    puts format("oribi unix / oribi tcp: %.3f", best["oribi unix"] / best["oribi tcp"])
  ensure
    Process.kill(:QUIT, nginx)
    Process.wait(nginx)
  end
end
