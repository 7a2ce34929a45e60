# frozen_string_literal: true

# `rake release:cut[VERSION]` (docs/RELEASING.md): the commit and tag a
# release is built from. In a clean checkout of main: VERSION (x.y.z, past
# the current one) into lib/oribi/version.rb, CHANGELOG.md's "Unreleased"
# becomes "VERSION (DATE)" under a new, empty "Unreleased", one commit,
# and the tag vVERSION. Nothing is pushed or built here.
module Release
  VERSION_FILE = "lib/oribi/version.rb"
  CHANGELOG = "CHANGELOG.md"

  class Refused < StandardError; end

  module_function

  def cut(root, version, date: Time.now.utc.strftime("%Y-%m-%d"))
    Dir.chdir(root) do
      check(version)
      File.write(VERSION_FILE, File.read(VERSION_FILE).sub(/VERSION = "[^"]+"/, %(VERSION = "#{version}")))
      log = File.read(CHANGELOG)
      File.write(CHANGELOG, log.sub(/^## Unreleased\n/, "## Unreleased\n\n## #{version} (#{date})\n"))
      git("commit", "-q", "-m", "Release #{version}", "--", VERSION_FILE, CHANGELOG)
      git("tag", "-a", "v#{version}", "-m", "Oribi #{version}")
    end
  end

  def check(version)
    raise Refused, "release: #{version.inspect} is not a version x.y.z" unless version.to_s.match?(/\A\d+\.\d+\.\d+\z/)

    current = File.read(VERSION_FILE)[/VERSION = "([^"]+)"/, 1]
    unless Gem::Version.new(version) > Gem::Version.new(current)
      raise Refused, "release: #{version} is not past the current version #{current}"
    end
    raise Refused, "release: the checkout has changes; commit or stash them first" unless git("status", "--porcelain").empty?
    raise Refused, "release: tag v#{version} exists" unless git("tag", "--list", "v#{version}").empty?

    unreleased = File.read(CHANGELOG)[/^## Unreleased\n(.*?)(?=^## |\z)/m, 1]
    raise Refused, "release: CHANGELOG.md's Unreleased section is empty" if unreleased.to_s.strip.empty?
  end

  def git(*args)
    out = IO.popen(["git", *args], err: %i[child out], &:read)
    raise Refused, "release: git #{args.first} failed: #{out}" unless $?.success?

    out
  end
end
