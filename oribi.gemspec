# frozen_string_literal: true

require_relative "lib/oribi/version"

Gem::Specification.new do |s|
  s.name = "oribi"
  s.version = Oribi::VERSION
  s.summary = "A prefork Rack 3 server with a C HTTP engine"
  s.description = "Oribi serves Rack 3 apps from prefork workers whose HTTP parsing, " \
                  "keep-alive and slow-client handling run in a C event loop."
  s.authors = ["Oribi developers"]
  s.license = "MIT"
  s.homepage = "https://github.com/oribi-rb/oribi"
  s.metadata = {
    "source_code_uri" => s.homepage,
    "changelog_uri" => "#{s.homepage}/blob/main/CHANGELOG.md",
    "documentation_uri" => "#{s.homepage}/tree/main/docs",
    "bug_tracker_uri" => "#{s.homepage}/issues",
    "rubygems_mfa_required" => "true",
  }
  s.required_ruby_version = ">= 3.1"
  # What serving needs and nothing of the development bundle (Gemfile): the
  # server extension's sources (built by `gem install`, or on first load
  # from a path: source, lib/oribi/extension.rb), the docs and the examples.
  # The load generator and the tuner are the oribi-bench gem's, in a folder
  # of its own (oribi-bench/): a production install compiles and ships
  # neither.
  s.files = Dir["lib/**/*.rb", "ext/oribi/**/*.{c,h,rb}", "exe/*", "*.md", "docs/*.md", "examples/**/*", "LICENSE"]
  s.bindir = "exe"
  s.executables = ["oribi"]
  s.extensions = ["ext/oribi/extconf.rb"]
  s.require_paths = ["lib"]
  s.add_dependency "rack", ">= 3.0", "< 4"
end
