# frozen_string_literal: true

require "etc"

module Oribi
  # What the process's cgroup lets it use: CPUs (cgroup v2 `cpu.max` and
  # `cpuset.cpus.effective`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`
  # and `cpuset.effective_cpus`) and memory (v2 `memory.max`, v1
  # `memory.limit_in_bytes`). The default worker count is one per usable
  # CPU, and the default max_worker_memory memory.max ÷ workers: a pod
  # limited to 2 CPUs on a 64-core node forks 2 workers, not 64.
  #
  # The tree is /sys/fs/cgroup, or $ORIBI_CGROUP_ROOT (a copy laid out the
  # same way, for tests). The process's own cgroup comes from
  # /proc/self/cgroup; a path the tree lacks (a container that mounts only
  # its own cgroup, as the root) is looked for in its parents. Limits are
  # hierarchical, so the tightest from the own cgroup up to the root counts.
  class Cgroup
    ROOT = "/sys/fs/cgroup"
    # v1 writes "no limit" as the largest page-aligned long; anything this
    # large is no limit.
    UNLIMITED = 1 << 60

    # count: the CPUs; why: where the number came from (for the banner).
    CPUs = Struct.new(:count, :why)
    # bytes: the limit; why: the file that set it.
    Memory = Struct.new(:bytes, :why)

    # The process's cgroup, read once.
    def self.current
      @current ||= new
    end

    # {controller => path}, "" for the v2 hierarchy, from the text of
    # /proc/self/cgroup ("ID:controller,controller:/path" per line).
    def self.own_paths(text)
      text.each_line.with_object({}) do |line, paths|
        _, controllers, path = line.chomp.split(":", 3)
        next unless path

        controllers.split(",").each { |c| paths[c.sub(/\Aname=/, "")] = path }
        paths[""] = path if controllers.empty?
      end
    end

    def initialize(root: ENV.fetch("ORIBI_CGROUP_ROOT", ROOT), own: nil)
      @root = root
      @paths = own ? Hash.new(own) : self.class.own_paths(read_proc_cgroup)
      @v2 = File.file?(File.join(root, "cgroup.controllers"))
    end

    # The CPUs this process may use: the host's (host: as the scheduler
    # lets it run, Etc.nprocessors) narrowed by a quota (rounded up: 1.5
    # CPUs are 2 workers, each throttled a little, rather than 1 leaving
    # half a CPU idle) and a cpuset.
    # A quota below the host's CPUs is named even where it rounds up to
    # them (1.5 CPUs on 2: 2 workers, "cpu.max 150000 100000 = 1.5 CPUs").
    def cpus(host: Etc.nprocessors)
      share, count, why = [quota, cpuset].compact.min_by(&:first)
      return CPUs.new(host, "#{host} CPU#{'s' if host > 1}, no cgroup limit") if share.nil? || share >= host

      CPUs.new([count, host].min, why)
    end

    # The memory limit, nil when there is none. Read once: the master asks
    # on every turn of its loop.
    def memory_max
      return @memory_max if defined?(@memory_max)

      @memory_max = read_memory_max
    end

    private

    def read_memory_max
      v2 = "memory.max"
      v1 = "memory.limit_in_bytes"
      tightest(*(@v2 ? ["", v2] : ["memory", v1])) do |text, dir|
        bytes = Integer(text, 10, exception: false)
        [bytes, "#{@v2 ? v2 : v1} #{bytes} in #{dir}"] if bytes && bytes < UNLIMITED
      end&.then { |bytes, why| Memory.new(bytes, why) }
    end

    def read_proc_cgroup
      File.read("/proc/self/cgroup")
    rescue SystemCallError
      ""
    end

    # [CPUs as a fraction, count, why] from a CPU quota, nil without one.
    def quota
      if @v2
        tightest("", "cpu.max") do |text|
          max, period = text.split
          next if max == "max" || period.to_i <= 0

          cpus_of(max.to_f / period.to_i, "cpu.max #{max} #{period}")
        end
      else
        tightest("cpu", "cpu.cfs_quota_us") do |text, dir|
          q = text.to_i
          period = read(File.join(dir, "cpu.cfs_period_us")).to_i
          cpus_of(q.to_f / period, "cpu.cfs_quota_us #{q} / cpu.cfs_period_us #{period}") if q.positive? && period.positive?
        end
      end
    end

    def cpus_of(fraction, why)
      n = [fraction.ceil, 1].max
      shown = fraction == fraction.round ? fraction.round : fraction.round(2)
      [fraction, n, "#{why} = #{shown} CPU#{'s' unless shown == 1 || shown < 1}"]
    end

    # [CPUs, count, why] from a cpuset, nil without one.
    def cpuset
      controller, file = @v2 ? ["", "cpuset.cpus.effective"] : ["cpuset", "cpuset.effective_cpus"]
      tightest(controller, file) do |text|
        n = count_list(text)
        [n, n, "#{file} #{text} = #{n} CPU#{'s' if n > 1}"] if n&.positive?
      end
    end

    # "0-3,8" => 5; nil when the text is not such a list.
    def count_list(text)
      text.split(",").sum do |part|
        a, b = part.split("-", 2).map { |n| Integer(n, 10, exception: false) }
        return nil if a.nil? || (part.include?("-") && b.nil?)

        b ? b - a + 1 : 1
      end
    end

    # The smallest of what the block makes of `file` in the own cgroup's
    # directory and each one above it (for `controller`'s hierarchy),
    # compared by first element; nil when none has a limit.
    def tightest(controller, file)
      base = controller.empty? ? @root : controller_root(controller)
      return nil unless base

      found = dirs(base, @paths[controller] || @paths[""] || "/").filter_map do |dir|
        text = read(File.join(dir, file)) or next
        yield(text, dir)
      end
      found.min_by(&:first)
    end

    # v1 mounts controllers side by side, some under joined names.
    def controller_root(controller)
      Dir.glob(File.join(@root, "*")).find do |d|
        File.directory?(d) && File.basename(d).split(",").include?(controller)
      end
    end

    # The own cgroup's directory (or its nearest existing parent) and every
    # directory above it up to base.
    def dirs(base, path)
      parts = path.split("/").reject(&:empty?)
      parts.pop until parts.empty? || File.directory?(File.join(base, *parts))
      (0..parts.size).map { |n| File.join(base, *parts.first(n)) }.reverse
    end

    def read(path)
      File.read(path).strip
    rescue SystemCallError
      nil
    end
  end
end
