# frozen_string_literal: true

require "etc"
require "rbconfig"

module Bench
  # Splits the CPUs between the servers and the load generator, as if the
  # load came from another machine: the servers on the first half (CPU 0 of
  # two), the load generator on the rest. Shared, the client's own cost per
  # connection (socket, connect, close: as much as a fast server's) is paid
  # from the servers' CPU time and squeezes every ratio towards 1.
  module Pin
    ENV_KEY = "ORIBI_BENCH_PIN" # "SERVER_CPUS/LOADGEN_CPUS", in the re-executed process

    module_function

    def possible? = Etc.nprocessors >= 2 && system("taskset", "-V", %i[out err] => File::NULL)

    # [server CPUs, load generator CPUs] as taskset lists.
    def split(n = Etc.nprocessors)
      servers = (n + 1) / 2
      [range(0, servers - 1), range(servers, n - 1)]
    end

    def range(first, last) = first == last ? first.to_s : "#{first}-#{last}"

    # Runs SCRIPT again with ARGV on the load generator's CPUs (its threads
    # inherit the CPU set) and never returns; in that process, returns the
    # split. nil when it cannot pin (one CPU, no taskset).
    def reexec!(script, argv)
      if (pinned = ENV[ENV_KEY])
        return pinned.split("/", 2)
      end
      return nil unless possible?

      servers, loadgen = split
      exec({ ENV_KEY => "#{servers}/#{loadgen}" }, "taskset", "-c", loadgen, RbConfig.ruby, script, *argv)
    end

    def argv(cpus, argv) = cpus ? ["taskset", "-c", cpus, *argv] : argv
  end
end
