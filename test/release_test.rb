# frozen_string_literal: true

require "minitest/autorun"
require "fileutils"
require "open3"
require "tmpdir"
require_relative "support/user_env"

# `rake release:cut[VERSION]` in a clone of this checkout: the version,
# the CHANGELOG section and the tag in one commit, and what it refuses.
class ReleaseTest < Minitest::Test
  ROOT = File.expand_path("..", __dir__)

  def sh(dir, *cmd)
    out, status = Open3.capture2e(user_env({ "GIT_AUTHOR_NAME" => "t", "GIT_AUTHOR_EMAIL" => "t@localhost",
                                             "GIT_COMMITTER_NAME" => "t", "GIT_COMMITTER_EMAIL" => "t@localhost" }),
                                  *cmd, chdir: dir)
    [out, status.success?]
  end

  def cut(dir, version) = sh(dir, RbConfig.ruby, "-S", "rake", "-f", File.join(dir, "Rakefile"), "release:cut[#{version}]")

  def test_cut_sets_the_version_moves_the_changelog_and_tags
    Dir.mktmpdir do |d|
      dir = File.join(d, "oribi")
      _, ok = sh(d, "git", "clone", "-q", ROOT, dir)
      assert ok
      # the task's files as they are in this checkout, committed there
      %w[Rakefile tasks/release.rb CHANGELOG.md lib/oribi/version.rb].each do |f|
        FileUtils.mkdir_p(File.dirname(File.join(dir, f)))
        FileUtils.cp(File.join(ROOT, f), File.join(dir, f))
      end
      sh(dir, "git", "add", "-A")
      sh(dir, "git", "commit", "-q", "--allow-empty", "-m", "the checkout under test")
      current = File.read(File.join(dir, "lib/oribi/version.rb"))[/VERSION = "([^"]+)"/, 1]
      out, ok = cut(dir, current)
      refute ok, out
      assert_match(/is not past the current version/, out)

      File.write(File.join(dir, "README.md"), "changed\n", mode: "a")
      out, ok = cut(dir, "99.0.0")
      refute ok, out
      assert_match(/the checkout has changes/, out)
      sh(dir, "git", "checkout", "-q", "README.md")

      out, ok = cut(dir, "99.0.0")
      assert ok, out
      assert_match(/VERSION = "99\.0\.0"/, File.read(File.join(dir, "lib/oribi/version.rb")))
      log = File.read(File.join(dir, "CHANGELOG.md"))
      assert_match(/\A# Changelog\n\n## Unreleased\n\n## 99\.0\.0 \(\d{4}-\d{2}-\d{2}\)\n/, log)
      tag, = sh(dir, "git", "describe", "--exact-match", "HEAD")
      assert_equal "v99.0.0", tag.strip
      status, = sh(dir, "git", "status", "--porcelain")
      assert_empty status

      out, ok = cut(dir, "99.0.1") # nothing under Unreleased now
      refute ok, out
      assert_match(/Unreleased section is empty/, out)
    end
  end
end
