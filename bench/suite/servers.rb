# frozen_string_literal: true

require "rbconfig"

module Bench
  module Suite
    # The servers the suite compares, and how each is started with the same
    # shape: WORKERS processes, one Ruby thread each serving requests,
    # RACK_ENV=production, listening on a unix socket and/or 127.0.0.1:PORT.
    #
    # unix:  can listen on a unix socket (else its unix and nginx cells go
    #        over TCP and are marked)
    # multi: can listen on both at once (else one boot per transport)
    # keepalive: answers more than one request per connection
    # apps:  workloads it can serve (ceilings serve a fixed response)
    Server = Struct.new(:name, :gem, :unix, :multi, :keepalive, :apps, :note, :argv,
                        keyword_init: true) do
      def ceiling? = gem.nil?
      def serves?(workload) = apps.nil? || apps.include?(workload)
    end

    ROOT = File.expand_path("../..", __dir__)
    LAUNCH = File.join(__dir__, "launch.rb")
    MINIMAL_SRC = File.join(ROOT, "bench", "ceiling", "minimal.c")
    RUBY = RbConfig.ruby

    def self.unicorn_conf(dir, name, workers, unix, port)
      path = File.join(dir, "#{name}.conf.rb")
      lines = ["worker_processes #{workers}"]
      lines << "listen #{unix.dump}, backlog: 1024" if unix
      lines << "listen \"127.0.0.1:#{port}\", backlog: 1024" if port
      File.write(path, lines.join("\n") + "\n")
      path
    end

    # argv: ->(tmpdir, workers, unix_path_or_nil, port_or_nil, app.ru, workload)
    SERVERS = [
      Server.new(name: "oribi", gem: "oribi", unix: true, multi: true, keepalive: true,
                 argv: lambda { |_d, w, u, p, app, _wl|
                   [RUBY, File.join(ROOT, "exe", "oribi"), "-E", "production", "-w", w.to_s, "-t", "1",
                    *(u ? ["-b", "unix://#{u}"] : []), *(p ? ["-b", "tcp://127.0.0.1:#{p}"] : []), app]
                 }),
      Server.new(name: "oribi-fqp", gem: "oribi", unix: true, multi: true, keepalive: true,
                 note: "oribi with --fast-query-parser (Rack's query and form parsing in C)",
                 argv: lambda { |d, w, u, p, app, wl|
                   SERVERS.first.argv.call(d, w, u, p, app, wl).insert(2, "--fast-query-parser")
                 }),
      Server.new(name: "unicorn", gem: "unicorn", unix: true, multi: true, keepalive: false,
                 note: "no keep-alive: closes after every response",
                 argv: lambda { |d, w, u, p, app, _wl|
                   [RUBY, "-S", "unicorn", "-E", "production", "-c", unicorn_conf(d, "unicorn", w, u, p), app]
                 }),
      Server.new(name: "puma", gem: "puma", unix: true, multi: true, keepalive: true,
                 note: "-w 2 -t 1:1; in the connection-per-request cells it waits more than it works " \
                       "(about half a CPU used): Puma 8 delays accepting in cluster mode while a worker " \
                       "is busy (Puma::ClusterAcceptLoopDelay), which fits",
                 argv: lambda { |_d, w, u, p, app, _wl|
                   [RUBY, "-S", "puma", "-e", "production", "-w", w.to_s, "-t", "1:1",
                    *(u ? ["-b", "unix://#{u}"] : []), *(p ? ["-b", "tcp://127.0.0.1:#{p}"] : []), app]
                 }),
      Server.new(name: "pitchfork", gem: "pitchfork", unix: true, multi: true, keepalive: false,
                 note: "no keep-alive: closes after every response",
                 argv: lambda { |d, w, u, p, app, _wl|
                   [RUBY, "-S", "pitchfork", "-c", unicorn_conf(d, "pitchfork", w, u, p), app]
                 }),
      Server.new(name: "falcon", gem: "falcon", unix: false, multi: false, keepalive: true,
                 note: "--forked -n 2: one fiber scheduler per process (fibers, one thread); TCP only here",
                 argv: lambda { |_d, w, _u, p, app, _wl|
                   [RUBY, "-S", "falcon", "serve", "--forked", "-n", w.to_s, "-b", "http://127.0.0.1:#{p}", "-c", app]
                 }),
      Server.new(name: "itsi", gem: "itsi-server", unix: true, multi: true, keepalive: true,
                 note: "-w 2 -t 1: a Rust HTTP engine calling the Rack app from its worker threads",
                 argv: lambda { |_d, w, u, p, app, _wl|
                   [RUBY, "-S", "itsi", "-w", w.to_s, "-t", "1", *(u ? ["-b", "unix://#{u}"] : []),
                    *(p ? ["-b", "http://127.0.0.1:#{p}"] : []), "-r", app]
                 }),
      Server.new(name: "iodine", gem: "iodine", unix: true, multi: true, keepalive: true,
                 note: "Iodine.workers = 2, Iodine.threads = 1 (bench/suite/launch.rb)",
                 argv: ->(_d, w, u, p, app, _wl) { [RUBY, LAUNCH, "iodine", w.to_s, u || "-", p ? p.to_s : "-", app] }),
      Server.new(name: "agoo", gem: "agoo", unix: true, multi: true, keepalive: true,
                 note: "worker_count: 2, thread_count: 1 (bench/suite/launch.rb)",
                 argv: ->(_d, w, u, p, app, _wl) { [RUBY, LAUNCH, "agoo", w.to_s, u || "-", p ? p.to_s : "-", app] }),
      Server.new(name: "rhebok", gem: "rhebok", unix: true, multi: false, keepalive: false,
                 note: "MaxWorkers 2, MaxRequestPerChild 0; no keep-alive; one listener per boot",
                 argv: ->(_d, w, u, p, app, _wl) { [RUBY, LAUNCH, "rhebok", w.to_s, u || "-", p ? p.to_s : "-", app] }),
      Server.new(name: "minimal", gem: nil, unix: true, multi: true, keepalive: true,
                 apps: %w[hello big post],
                 note: "ceiling: bench/ceiling/minimal.c, a fixed 200 of the workload's size",
                 argv: lambda { |d, w, u, p, _app, wl|
                   size = wl == "big" ? 102_400 : 14
                   [minimal_binary(d), "-w", w.to_s, *(u ? ["-u", u] : []), *(p ? ["-p", p.to_s] : []),
                    "-s", size.to_s]
                 }),
      Server.new(name: "nginx", gem: nil, unix: true, multi: true, keepalive: true, apps: %w[hello],
                 note: "ceiling: nginx `return 200`, worker_processes 2",
                 argv: ->(d, w, u, p, _app, _wl) { Nginx.return200_argv(d, w, u, p) })
    ].freeze

    def self.server(name)
      SERVERS.find { |s| s.name == name } or
        raise ArgumentError, "unknown server #{name} (known: #{SERVERS.map(&:name).join(', ')})"
    end

    # bench/ceiling/minimal.c, compiled once per suite run with cc.
    def self.minimal_binary(dir)
      bin = File.join(dir, "minimal")
      return bin if File.exist?(bin)

      ok = system("cc", "-O2", "-Wall", "-Wextra", "-o", bin, MINIMAL_SRC)
      raise "cc failed on #{MINIMAL_SRC}" unless ok

      bin
    end

    # The installed version of a server, or nil when it is not installed
    # (under the bundle the suite runs in).
    def self.version(server)
      return nginx_version if server.name == "nginx"
      return "-" if server.ceiling?
      return Oribi::VERSION if server.gem == "oribi" && defined?(Oribi::VERSION)

      Gem.loaded_specs[server.gem]&.version&.to_s ||
        (Gem::Specification.find_by_name(server.gem).version.to_s rescue nil) # rubocop:disable Style/RescueModifier
    end

    def self.nginx_version
      out = IO.popen(["nginx", "-v", { err: %i[child out] }], &:read)
      out[%r{nginx/(\S+)}, 1]
    rescue SystemCallError
      nil
    end
  end
end
