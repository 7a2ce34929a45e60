# frozen_string_literal: true

require "test_helper"
require "oribi/cgroup"
require "minitest/mock"

# The default worker count and memory limit from the CPUs and memory the
# container may use (lib/oribi/cgroup.rb), on fake cgroup trees: the test
# machine's own cgroups cannot be changed. ORIBI_CGROUP_ROOT points the
# server at a tree laid out like /sys/fs/cgroup.
class CgroupTest < Minitest::Test
  HOST_CPUS = Etc.nprocessors

  def setup
    @roots = []
  end

  def teardown
    @roots.each { |r| FileUtils.rm_rf(r) }
  end

  # A fake cgroup tree: files (relative path => content) under a new root.
  def tree(files)
    root = Dir.mktmpdir("oribi-cgroup")
    @roots << root
    files.each do |path, content|
      full = File.join(root, path)
      FileUtils.mkdir_p(File.dirname(full))
      File.write(full, "#{content}\n")
    end
    root
  end

  V2 = { "cgroup.controllers" => "cpuset cpu io memory pids" }.freeze

  def cgroup(root, own = "/") = Oribi::Cgroup.new(root: root, own: own)

  # ---- the server's default, through real processes ----

  # No -w and no WEB_CONCURRENCY: the master forks one worker per CPU the
  # cgroup allows, and its banner says where the number came from.
  def start(root, env = {})
    ServerProcess.new("slow.ru", workers: nil, unix: false,
                                 env: { "WEB_CONCURRENCY" => nil, "ORIBI_CGROUP_ROOT" => root }.merge(env))
  end

  def assert_workers(srv, count)
    assert wait_until { srv.worker_pids.size == count && srv.log.scan("listening on").any? },
           "#{srv.worker_pids.size} workers, expected #{count}\n#{srv.log}"
    assert_equal 200, HTTPClient.request(srv.tcp, "/").status
  end

  def test_a_v2_cpu_quota_below_the_host_sets_the_worker_count
    skip "needs a host with 2 CPUs or more" if HOST_CPUS < 2
    srv = start(tree(V2.merge("cpu.max" => "50000 100000", "memory.max" => "max")))
    assert_workers(srv, 1)
    assert_match(/, 1 worker \(one per usable CPU: cpu\.max 50000 100000 = 0\.5 CPU/, srv.log)
  ensure
    srv&.stop
  end

  def test_a_v2_cpuset_narrows_the_count
    skip "needs a host with 2 CPUs or more" if HOST_CPUS < 2
    srv = start(tree(V2.merge("cpu.max" => "max 100000", "cpuset.cpus.effective" => "1")))
    assert_workers(srv, 1)
    assert_match(/1 worker \(one per usable CPU: cpuset\.cpus\.effective 1 = 1 CPU/, srv.log)
  ensure
    srv&.stop
  end

  def test_a_v1_cfs_quota_sets_the_worker_count
    skip "needs a host with 2 CPUs or more" if HOST_CPUS < 2
    srv = start(tree("cpu/cpu.cfs_quota_us" => "100000", "cpu/cpu.cfs_period_us" => "100000"))
    assert_workers(srv, 1)
    assert_match(/1 worker \(one per usable CPU: cpu\.cfs_quota_us 100000 \/ cpu\.cfs_period_us 100000 = 1 CPU/, srv.log)
  ensure
    srv&.stop
  end

  def test_no_limit_is_one_worker_per_host_cpu
    srv = start(tree(V2.merge("cpu.max" => "max 100000", "memory.max" => "max")))
    assert_workers(srv, HOST_CPUS)
    assert_match(/#{HOST_CPUS} workers? \(one per usable CPU: #{HOST_CPUS} CPUs?, no cgroup limit\)/, srv.log)
  ensure
    srv&.stop
  end

  def test_web_concurrency_wins_and_the_banner_says_so
    srv = start(tree(V2.merge("cpu.max" => "50000 100000")), "WEB_CONCURRENCY" => "2")
    assert_workers(srv, 2)
    assert_match(/2 workers \(\$WEB_CONCURRENCY\)/, srv.log)
  ensure
    srv&.stop
  end

  # ---- reading the tree ----

  def test_v2_quota_rounds_up
    c = cgroup(tree(V2.merge("cpu.max" => "150000 100000")))
    assert_equal 2, c.cpus(host: 8).count
  end

  # 1.5 CPUs on a 2-CPU host are 2 workers, but the banner said "2 CPUs,
  # no cgroup limit": the limit is named.
  def test_a_quota_that_rounds_up_to_the_host_is_still_named
    cpus = cgroup(tree(V2.merge("cpu.max" => "150000 100000"))).cpus(host: 2)
    assert_equal [2, "cpu.max 150000 100000 = 1.5 CPUs"], [cpus.count, cpus.why]
    assert_equal "2 CPUs, no cgroup limit", cgroup(tree(V2.merge("cpu.max" => "200000 100000"))).cpus(host: 2).why
  end

  def test_cpuset_lists
    { "0-3,8,10-11" => 7, "5" => 1, "0-63" => 64 }.each do |list, n|
      assert_equal [n, list], [cgroup(tree(V2.merge("cpuset.cpus.effective" => list))).cpus(host: 128).count, list]
    end
  end

  def test_the_lowest_of_quota_cpuset_and_host
    c = cgroup(tree(V2.merge("cpu.max" => "400000 100000", "cpuset.cpus.effective" => "0-2")))
    assert_equal 3, c.cpus(host: 8).count
    assert_equal 2, c.cpus(host: 2).count
  end

  # Limits are hierarchical: a parent's quota binds its children. The
  # process's own cgroup comes from /proc/self/cgroup; a path missing from
  # the tree (a container that mounts only its own cgroup as the root) is
  # looked for in its parents, down to the root.
  def test_the_tightest_limit_from_the_own_cgroup_up_to_the_root
    root = tree(V2.merge("kubepods/cpu.max" => "200000 100000", "kubepods/pod1/cpu.max" => "max 100000",
                         "kubepods/pod1/memory.max" => "1073741824", "kubepods/memory.max" => "max"))
    c = cgroup(root, "/kubepods/pod1")
    assert_equal 2, c.cpus(host: 64).count
    assert_equal 1 << 30, c.memory_max.bytes
    assert_equal 2, cgroup(root, "/kubepods/pod1/gone/deeper").cpus(host: 64).count
  end

  def test_v1_memory_limit_and_its_unlimited_value
    assert_equal 512 << 20, cgroup(tree("memory/memory.limit_in_bytes" => (512 << 20).to_s)).memory_max.bytes
    assert_nil cgroup(tree("memory/memory.limit_in_bytes" => "9223372036854771712")).memory_max
    assert_nil cgroup(tree(V2.merge("memory.max" => "max"))).memory_max
  end

  def test_no_cgroup_files_at_all
    c = cgroup(tree({}))
    assert_equal 3, c.cpus(host: 3).count
    assert_nil c.memory_max
  end

  # macOS, the BSDs: neither /proc/self/cgroup nor a tree, so no limit.
  def test_no_proc_self_cgroup_and_no_tree
    read = File.method(:read)
    no_proc = ->(path, *args, **kw) { path == "/proc/self/cgroup" ? raise(Errno::ENOENT, path) : read.call(path, *args, **kw) }
    File.stub(:read, no_proc) do
      c = Oribi::Cgroup.new(root: File.join(tree({}), "absent"))
      assert_equal 3, c.cpus(host: 3).count
      assert_nil c.memory_max
    end
  end

  # /proc/self/cgroup as the kernel writes it: the v2 line, v1 lines by
  # controller (comma-joined names).
  def test_own_paths_from_proc_self_cgroup
    text = "12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/system.slice/x.service\n"
    paths = Oribi::Cgroup.own_paths(text)
    assert_equal "/system.slice/x.service", paths[""]
    assert_equal "/docker/abc", paths["cpu"]
    assert_equal "/docker/abc", paths["memory"]
  end
end
