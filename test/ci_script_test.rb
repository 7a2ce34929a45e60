# frozen_string_literal: true

require_relative "test_helper"
require "open3"
require "json"

# .ci/run is read only by CI, after the session that changed it: a rake task
# it calls that the Rakefile lost fails there, forty minutes in. Every
# `rake TASK` it names must be a task.
class CiScriptTest < Minitest::Test
  def test_every_rake_task_the_ci_script_calls_exists
    script = File.read(File.join(ROOT, ".ci/run"))
    called = script.scan(/\bexec rake\s+"?([a-z][\w:]*)/).flatten.uniq
    refute_empty called, "no rake call found in .ci/run: the pattern no longer matches it"

    out, status = Open3.capture2e(RbConfig.ruby, "-S", "rake", "-AT", chdir: ROOT)
    assert status.success?, out
    tasks = out.scan(/^rake ([\w:]+)/).flatten
    missing = called - tasks
    assert_empty missing, ".ci/run calls rake tasks the Rakefile does not define"
  end

  # README.md's two commands: the first line of each of its first two
  # fenced blocks, each a chain of `bundle` calls.
  def readme_commands
    blocks = File.read(File.join(ROOT, "README.md")).scan(/^```\w*\n(.*?)^```/m).flatten.first(2).map(&:strip)
    assert_equal 2, blocks.size, "README.md has no two commands in fenced blocks"
    blocks
  end

  def bundle_calls(command)
    command.split(/\s*&&\s*/).map do |call|
      assert call.start_with?("bundle "), "a README command that is not a bundle call: #{call}"
      call.delete_prefix("bundle ")
    end
  end

  # CI's last step runs the README's commands as a user does, in a fresh
  # clone (CI's own checkout has a bundle configured in vendor/bundle that
  # a user's has not), the test command written out as the README gives it.
  def test_ci_ends_with_the_readme_commands_in_a_fresh_clone
    script = File.read(File.join(ROOT, ".ci/run"))
    steps = script.lines.map(&:strip).reject { |l| l.empty? || l.start_with?("#", "step ") }
    assert_equal ".ci/readme '#{readme_commands.last}'", steps.last, "the last thing .ci/run does"
    assert_equal 1, script.scan(readme_commands.last).size, "the README's test command, once, in the fresh clone's step"
  end

  # A `bundle` that records where and how it is called, and a `curl`
  # that sees the first command's server once it started.
  STUB_BUNDLE = <<~'SH'
    #!/usr/bin/env bash
    top=$(git rev-parse --show-toplevel 2>/dev/null || true)
    head=$(git rev-parse HEAD 2>/dev/null || true)
    config=$([ -e .bundle/config ] && echo yes || echo no)
    vars=$(env | grep -E '^(BUNDLE_|BUNDLER_|RUBYOPT=|GEM_HOME=|GEM_PATH=)' | cut -d= -f1 | tr '\n' ' ')
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$PWD" "$top" "$head" "$config" "$vars" "$*" >> "$STUB_DIR/calls"
    case "$*" in
      "config set --local "*) mkdir -p .bundle && echo "BUNDLE_WITH: x" > .bundle/config ;;
      "exec oribi "*) echo $$ > "$STUB_DIR/server.pid"; exec sleep 120 ;;
      "exec rake test") exit "${STUB_TEST_STATUS:-0}" ;;
    esac
  SH
  STUB_CURL = <<~'SH'
    #!/usr/bin/env bash
    if [ -e "$STUB_DIR/server.pid" ]; then printf 200; else printf 000; fi
  SH

  def run_readme_script(stubs, extra = {})
    FileUtils.rm_f([File.join(stubs, "calls"), File.join(stubs, "server.pid")])
    env = { "PATH" => "#{stubs}:#{ENV.fetch('PATH')}", "STUB_DIR" => stubs, "TMPDIR" => stubs,
            "BUNDLE_PATH" => "vendor/bundle", "BUNDLE_WITH" => "peers" }.merge(extra)
    out, status = Open3.capture2e(env, File.join(ROOT, ".ci/readme"), readme_commands.last, chdir: ROOT)
    calls = File.exist?(File.join(stubs, "calls")) ? File.readlines(File.join(stubs, "calls"), chomp: true) : []
    [out, status, calls.map { |l| l.split("\t", -1) }]
  end

  def test_the_readme_script_runs_the_readme_commands_in_a_fresh_clone_with_no_bundle_config
    Dir.mktmpdir("oribi-ci") do |stubs|
      { "bundle" => STUB_BUNDLE, "curl" => STUB_CURL }.each do |name, text|
        File.write(File.join(stubs, name), text)
        File.chmod(0o755, File.join(stubs, name))
      end
      out, status, calls = run_readme_script(stubs)
      assert status.success?, out

      expected = readme_commands.flat_map { |c| bundle_calls(c) }
      assert_equal expected, calls.map(&:last), "the README's commands, in order:\n#{out}"
      dirs = calls.map(&:first).uniq
      assert_equal 1, dirs.size, "one clone for both commands"
      clone = dirs.first
      refute clone.start_with?("#{ROOT}/"), "a clone elsewhere than the checkout"
      head, = Open3.capture2("git", "rev-parse", "HEAD", chdir: ROOT)
      calls.each do |_dir, top, rev, _config, vars, args|
        assert_equal clone, top, "#{args}: in a git clone's top directory"
        assert_equal head.strip, rev, "#{args}: a clone of this checkout's HEAD"
        assert_empty vars.strip, "#{args}: under no Bundler variable of CI's"
      end
      assert_equal "no", calls.first[3], "no .bundle/config before the README's first command"
      refute File.exist?(clone), "the clone removed"
      pid = File.read(File.join(stubs, "server.pid")).to_i
      assert wait_until { !process_alive?(pid) }, "the first command's server stopped"

      # the suite's status is the script's
      out, status, calls = run_readme_script(stubs, "STUB_TEST_STATUS" => "3")
      refute status.success?, out
      assert_equal "exec rake test", calls.last.last

      # a test command other than the README's is refused before anything runs
      FileUtils.rm_f(File.join(stubs, "calls"))
      out, status = Open3.capture2e({ "PATH" => "#{stubs}:#{ENV.fetch('PATH')}", "STUB_DIR" => stubs },
                                    File.join(ROOT, ".ci/readme"), "bundle exec rake test", chdir: ROOT)
      assert_equal 2, status.exitstatus, out
      refute File.exist?(File.join(stubs, "calls")), "nothing ran"
    end
  end
end
