# frozen_string_literal: true

module Oribi
  # Each connection is a file descriptor (two while its body or response
  # is in a tmpfile). With systemd's default soft RLIMIT_NOFILE of 1024 a
  # worker ran out of fds before it reached max_connections, so it never
  # shed: accept4 failed with EMFILE and new clients waited in the backlog.
  # At boot the soft limit is raised to the hard one (as Go's runtime
  # does; nginx's worker_rlimit_nofile), and max_connections is capped to
  # what the limit leaves, with a line saying so. The workers inherit both.
  module FdLimit
    # fds a worker keeps besides its connections: Ruby's own, the
    # listeners (twice), epoll, the log files, the app's (database
    # connections, files); never less than half the limit for connections.
    RESERVE = 64
    NR_OPEN = 1 << 20 # Linux's default nr_open

    module_function

    # Raises the soft limit, caps config[:max_connections]; → the soft limit.
    def apply(config)
      soft, hard = Process.getrlimit(:NOFILE)
      target = hard == Process::RLIM_INFINITY ? nr_open : hard
      if soft < target
        begin
          Process.setrlimit(:NOFILE, target, hard)
          soft = target
        rescue SystemCallError
          nil # a container may refuse: the cap below still holds
        end
      end
      cap = connections(soft)
      if config[:max_connections] > cap
        Log.info("max_connections #{config[:max_connections]} is more than RLIMIT_NOFILE #{soft} (hard #{show(hard)}) " \
                 "leaves room for: #{cap} per worker (raise the limit: docs/DEPLOYMENT.md)")
        config[:max_connections] = cap
      end
      soft
    end

    # Oribi::FDS_PER_CONNECTION: two on the kqueue build through libkqueue,
    # which watches a socket's writes on a duplicate of it.
    def connections(limit) = [[limit - RESERVE, limit / 2].max / Oribi::FDS_PER_CONNECTION, 1].max

    # The most a soft limit may be when the hard one is unlimited: Linux's
    # nr_open; macOS refuses a soft limit above kern.maxfilesperproc (the
    # BSDs cap it there), as Go's runtime found.
    def nr_open
      return Platform.sysctl("kern.maxfilesperproc") || NR_OPEN unless Platform.procfs?

      Integer(File.read("/proc/sys/fs/nr_open"))
    rescue SystemCallError, ArgumentError
      NR_OPEN
    end

    def show(limit) = limit == Process::RLIM_INFINITY ? "unlimited" : limit
  end
end
