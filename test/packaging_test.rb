# frozen_string_literal: true

require "test_helper"
require "open3"
require "rubygems/package"

# The gem as a user gets it: from `gem install` (the extensions built at
# install time) and from a Bundler `path:` source (built on first load),
# each in a copy of the sources with no extension built, serving a request.
class PackagingTest < Minitest::Test
  # The sources a checkout holds (tracked, or new and not ignored), links
  # as links (the tools' ext/oribi).
  def copy_sources(to)
    files, status = Open3.capture2("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", chdir: ROOT)
    skip "not a git checkout" unless status.success?
    files.split("\0").each do |f|
      from = File.join(ROOT, f)
      next unless File.symlink?(from) || File.file?(from)

      FileUtils.mkdir_p(File.join(to, File.dirname(f)))
      File.symlink?(from) ? File.symlink(File.readlink(from), File.join(to, f)) : FileUtils.cp(from, File.join(to, f))
    end
    refute_empty Dir[File.join(to, "lib/oribi/*.rb")]
    assert_empty Dir[File.join(to, "**/*.so")]
  end

  # Runs cmd, waits for it to serve GET / on port; → the log.
  def serve_once(env, cmd, port, chdir:)
    log = File.join(chdir, "serve.log")
    server = Oribi::ProcessGroup.new(cmd, env: user_env(env), chdir: chdir, log: log)
    res = nil
    ok = wait_until(timeout: 240) do
      res = HTTPClient.request(TCPSocket.new("127.0.0.1", port), "/", headers: { "Connection" => "close" })
    rescue SystemCallError, EOFError
      raise "exited:\n#{File.read(log)}" if server.exited?

      false
    end
    assert ok, File.read(log)
    assert_equal 200, res.status
    File.read(log)
  ensure
    server&.stop(:KILL, timeout: 0)
  end

  def test_a_path_gem_builds_its_extensions_on_first_load
    Dir.mktmpdir("oribi-pkg") do |d|
      copy_sources(src = File.join(d, "oribi"))
      app = File.join(d, "app")
      FileUtils.mkdir_p(app)
      File.write(File.join(app, "Gemfile"), "source \"https://rubygems.org\"\ngem \"oribi\", path: \"../oribi\"\n" \
                                            "gem \"oribi-bench\", path: \"../oribi/oribi-bench\"\n")
      File.write(File.join(app, "config.ru"), "run ->(_env) { [200, {}, [\"hello\"]] }\n")
      env = { "ORIBI_BUILD_DIR" => File.join(d, "cache"), "BUNDLE_GEMFILE" => File.join(app, "Gemfile"),
              "GEM_HOME" => File.join(d, "gems") }
      out, status = Open3.capture2e(user_env(env), "bundle", "install", "--local", chdir: app)
      assert status.success?, out
      assert_empty Dir[File.join(src, "**/*.so")], "Bundler builds nothing for a path gem"

      port = free_port
      cmd = ["bundle", "exec", "oribi", "-w", "0", "-b", "tcp://127.0.0.1:#{port}", "config.ru"]
      # a production boot does not build; it says how to build ahead
      out, status = Open3.capture2e(user_env(env.merge("RAILS_ENV" => "production")), *cmd, chdir: app)
      refute status.success?, out
      assert_match(/^oribi: the oribi C extension is not built /, out) # (after any warning of Bundler)
      assert_empty Dir[File.join(d, "cache", "*", "*.so")]
      # the command it names, run as it is written, builds it
      ahead = out[/build it ahead with `([^`]+)`/, 1]
      assert_equal %(ORIBI_BUILD=1 bundle exec ruby -e 'require "oribi"'), ahead, out
      built, status = Open3.capture2e(user_env(env), "bash", "-c", ahead, chdir: app)
      assert status.success?, built
      assert_match(/building the oribi C extension/, built)
      log = serve_once(env.merge("RAILS_ENV" => "production"), cmd, port, chdir: app)
      refute_match(/building/, log, "built ahead, then taken from the cache")
      # the load generator's extension is built the same way
      out, status = Open3.capture2e(user_env(env), "bundle", "exec", "oribi", "bench", "--help", chdir: app)
      assert status.success?, out
      assert_match(/building the oribi_bench C extension/, out)
    end
  end

  # `gem install oribi` builds one extension and ships no tool;
  # oribi-bench, installed beside it, brings `oribi bench` and `oribi tune`.
  def test_gem_install_builds_the_server_alone_and_oribi_bench_the_tools
    Dir.mktmpdir("oribi-pkg") do |d|
      copy_sources(src = File.join(d, "oribi"))
      server, tools = { "oribi" => src, "oribi-bench" => File.join(src, "oribi-bench") }.map do |name, dir|
        out, status = Open3.capture2e(user_env({}), "gem", "build", "#{name}.gemspec", chdir: dir)
        assert status.success?, out
        Dir[File.join(dir, "#{name}-[0-9]*.gem")].first
      end
      spec = Gem::Package.new(server).spec
      assert_equal ["rack"], spec.runtime_dependencies.map(&:name), "nothing of the development bundle"
      assert_empty spec.development_dependencies
      assert_equal ["ext/oribi/extconf.rb"], spec.extensions
      %w[LICENSE README.md examples/hello.ru examples/systemd/oribi.service docs/RAILS.md ext/oribi/extconf.rb].each do |f|
        assert_includes spec.files, f
      end
      assert_empty spec.files.grep(%r{oribi_bench|/bench|/tune|/report/|loadgen}), "no tool in the server gem"
      assert spec.homepage && spec.metadata["source_code_uri"], "homepage and source metadata"
      tools_spec = Gem::Package.new(tools).spec
      assert_equal [["oribi", [spec.version.to_s]]],
                   tools_spec.runtime_dependencies.map { |dep| [dep.name, dep.requirement.requirements.map { |r| r[1].to_s }] }
      assert_includes tools_spec.files, "lib/oribi/report/uplot/LICENSE"
      assert_includes tools_spec.files, "docs/BENCH.md"
      refute_includes spec.files, "docs/BENCH.md"
      assert_includes tools_spec.files, "ext/oribi/http/parser.c" # the codec it borrows
      assert_includes tools_spec.files, "lib/oribi/process_group.rb" # tune's servers
      refute_includes spec.files, "lib/oribi/process_group.rb"

      home = File.join(d, "gems")
      install = ->(gem) { Open3.capture2e(user_env({}), "gem", "install", "--local", "--ignore-dependencies", "--no-document", "--install-dir", home, gem, chdir: d) }
      out, status = install.call(server)
      assert status.success?, out
      assert_empty Dir[File.join(home, "**/oribi_bench.so")], "one extension built"
      port = free_port
      env = { "GEM_HOME" => home, "GEM_PATH" => [home, *Gem.path].join(":"), "ORIBI_BUILD_DIR" => File.join(d, "cache") }
      oribi = File.join(home, "bin/oribi")
      hello = File.join(home, "gems", File.basename(server, ".gem"), "examples/hello.ru")
      log = serve_once(env, [RbConfig.ruby, oribi, "-w", "0", "-b", "tcp://127.0.0.1:#{port}", hello], port, chdir: d)
      refute_match(/building/, log, "gem install built the extension")
      out, status = Open3.capture2e(user_env(env), RbConfig.ruby, oribi, "bench", "--help", chdir: d)
      refute status.success?
      assert_match(/oribi bench is in the oribi-bench gem: `gem install oribi-bench`/, out)

      out, status = install.call(tools)
      assert status.success?, out
      out, status = Open3.capture2e(user_env(env), RbConfig.ruby, oribi, "bench", "-n", "3", "http://127.0.0.1:#{port}/",
                                    chdir: d)
      refute status.success?, "nothing listens there now: exit 1 with a report"
      assert_match(/Requests\s+\[total/, out)
      refute File.exist?(File.join(d, "cache")), "nothing built on first load"
    end
  end

  # The README's first command (`bundle install`) installs what serving and
  # building need, nothing with a C extension of its own to compile; the
  # rest of the development bundle is in optional groups.
  def test_bundle_install_without_options_installs_only_what_serving_needs
    require "bundler"
    definition = Bundler::Definition.build(File.join(ROOT, "Gemfile"), File.join(ROOT, "Gemfile.lock"), nil)
    specs = definition.specs_for([:default])
    assert_equal %w[base64 bundler minitest oribi oribi-bench rack rackup rake rake-compiler], specs.map(&:name).uniq.sort
    assert_empty specs.reject { |sp| sp.name.start_with?("oribi") || sp.extensions.empty? }.map(&:name)
    optional = definition.dependencies.reject { |d| d.groups == [:default] }.flat_map(&:groups).uniq
    gemfile = File.read(File.join(ROOT, "Gemfile"))
    optional.each { |g| assert_match(/^group :#{g}, optional: true do$/, gemfile) }
  end
end
