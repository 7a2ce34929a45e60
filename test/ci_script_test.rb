# frozen_string_literal: true

require_relative "test_helper"
require "open3"

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
end
