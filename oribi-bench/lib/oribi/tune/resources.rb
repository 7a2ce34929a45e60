# frozen_string_literal: true

require "etc"
require "oribi/platform"

module Oribi
  module Tune
    # What a server costs: its workers (the master's children), CPU time of
    # the whole tree, and RSS and PSS of each process (PSS shares
    # copy-on-write pages among the processes mapping them, so the PSS of
    # master and workers adds up to what the tree really holds; RSS counts
    # shared pages in every process). Read from /proc (Linux), else from
    # one ps run (Platform), which knows no PSS: nil then.
    module Resources
      module_function

      TICK = Etc.sysconf(Etc::SC_CLK_TCK).to_f

      # Live children of pid, sorted.
      def children(pid)
        unless Platform.procfs?
          return Platform.processes.filter_map { |child, row| child if row.ppid == pid && row.state != "Z" }.sort
        end

        proc_stats.filter_map { |child, f| child if f[1].to_i == pid && f[0] != "Z" }.sort
      end

      # { pid => stat fields } of every process in /proc now.
      def proc_stats
        Dir.glob("/proc/[0-9]*/stat").each_with_object({}) do |f, h|
          h[f[%r{/proc/(\d+)/}, 1].to_i] = stat_fields(File.read(f))
        rescue SystemCallError
          next # gone meanwhile
        end
      end

      # CPU seconds (user + system, all threads) used so far by pids
      # together; a pid gone meanwhile counts for nothing.
      def cpu_seconds(pids)
        return Platform.processes(pids).sum(0.0) { |_, row| row.cpu } unless Platform.procfs?

        pids.sum do |pid|
          f = stat_fields(File.read("/proc/#{pid}/stat"))
          (f[11].to_i + f[12].to_i) / TICK # utime, stime: fields 14, 15
        rescue SystemCallError
          0.0
        end
      end

      # { rss:, pss: } in bytes, nil when the process is gone.
      def memory(pid)
        unless Platform.procfs?
          row = Platform.processes([pid])[pid]
          return row && { rss: row.rss, pss: nil }
        end

        text = File.read("/proc/#{pid}/smaps_rollup")
        { rss: kib(text, "Rss"), pss: kib(text, "Pss") }
      rescue SystemCallError
        nil
      end

      def kib(text, key) = text[/^#{key}:\s+(\d+) kB/, 1].to_i * 1024

      # Fields after "(comm)", which may itself hold spaces or parentheses:
      # [state, ppid, ...].
      def stat_fields(stat) = stat.sub(/\A.*\) /m, "").split
    end
  end
end
