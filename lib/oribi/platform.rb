# frozen_string_literal: true

module Oribi
  # What the OS offers the Ruby side about processes. Linux has /proc, read
  # directly (cheap, no process started); macOS and the BSDs do not, and
  # there one `ps` run answers for every process asked about, and `sysctl`
  # for a kernel limit.
  #
  # ORIBI_PORTABLE=1 builds the portable C extension (every POSIX fallback
  # on); at run time it also sends the Ruby side down its non-/proc paths,
  # so that Linux CI runs them too.
  module Platform
    # A process as ps shows it: ppid; state, its first letter ("Z": a
    # zombie); rss in bytes; cpu: user + system seconds, all threads.
    Row = Struct.new(:ppid, :state, :rss, :cpu)

    # ps's cumulative CPU time: procps writes [dd-]hh:mm:ss (whole
    # seconds), the BSDs and macOS mm:ss.cc (minutes past 59); any
    # [[dd-]hh:]mm:ss[.cc].
    TIME = /\A(?:(?:(\d+)-)?(\d+):)?(\d+):(\d+(?:\.\d+)?)\z/

    PAGE = begin
      Etc.sysconf(Etc::SC_PAGESIZE)
    rescue StandardError
      4096
    end

    module_function

    def procfs? = ENV["ORIBI_PORTABLE"] != "1" && File.readable?("/proc/self/stat")

    # {pid => Row} of pids (of every process when nil) that exist, from
    # one ps run; {} when ps cannot be run.
    def processes(pids = nil)
      return {} if pids && pids.empty?

      which = pids ? ["-p", pids.join(",")] : ["-A"]
      # rss is in KiB everywhere; LC_ALL=C: "1.50", not "1,50"
      out = IO.popen({ "LC_ALL" => "C" }, ["ps", "-o", "pid=,ppid=,stat=,rss=,time=", *which], err: File::NULL, &:read)
      out.each_line.with_object({}) do |line, rows|
        pid, ppid, state, rss, time = line.split
        next unless time

        rows[pid.to_i] = Row.new(ppid.to_i, state[0], rss.to_i * 1024, ps_time(time) || 0.0)
      end
    rescue SystemCallError
      {}
    end

    # Resident set size of a process in bytes, nil when unknown.
    def rss(pid) = rss_of([pid])[pid]

    # {pid => resident bytes} of the pids that could be read: /proc's
    # statm, else one ps for all of them.
    def rss_of(pids)
      return processes(pids).transform_values(&:rss) unless procfs?

      pids.to_h do |pid|
        [pid, File.read("/proc/#{pid}/statm").split[1].to_i * PAGE]
      rescue SystemCallError
        [pid, nil]
      end.compact
    end

    # Whether pid runs: exists and is not a zombie (its parent has not
    # reaped it yet).
    def alive?(pid)
      if procfs?
        stat = File.read("/proc/#{pid}/stat")
        return stat[stat.rindex(")") + 2] != "Z"
      end
      (row = processes([pid])[pid]) && row.state != "Z"
    rescue SystemCallError
      false
    end

    # Seconds in a ps TIME, nil when it is not one.
    def ps_time(text)
      m = TIME.match(text) or return nil
      days, hours, minutes, seconds = m.captures
      ((days.to_i * 24 + hours.to_i) * 60 + minutes.to_i) * 60 + seconds.to_f
    end

    # An integer sysctl (BSD, macOS), nil when there is none.
    def sysctl(name)
      out = IO.popen(["sysctl", "-n", name], err: File::NULL, &:read)
      Integer(out.strip, 10, exception: false)
    rescue SystemCallError
      nil
    end
  end
end
