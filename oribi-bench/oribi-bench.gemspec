# frozen_string_literal: true

require_relative "../lib/oribi/version"

# The tools, a gem of their own so that a server install carries none of
# them: `oribi bench` (the load generator, a C extension) and `oribi tune`,
# with the charting library of their HTML reports. The `oribi` command of
# the oribi gem runs them once this gem is installed; the two are released
# together, at one version. Everything here is this folder's; the codec
# the load generator reads responses with is the server's (ext/oribi is a
# link to it), packed into this gem as a copy.
Gem::Specification.new do |s|
  s.name = "oribi-bench"
  s.version = Oribi::VERSION
  s.summary = "oribi bench and oribi tune: a load generator and a tuner for Rack servers"
  s.description = "A load generator in C over unix sockets and TCP, closed and open loop " \
                  "(coordinated-omission-correct), with vegeta-style reports and plots; and a " \
                  "tuner that finds the workers and threads to run a Rack app with."
  s.authors = ["Oribi developers"]
  s.license = "MIT"
  s.homepage = "https://github.com/oribi-rb/oribi"
  s.metadata = {
    "source_code_uri" => "#{s.homepage}/tree/main/oribi-bench",
    "documentation_uri" => "#{s.homepage}/blob/main/oribi-bench/docs/BENCH.md",
    "rubygems_mfa_required" => "true",
  }
  s.required_ruby_version = ">= 3.1"
  # One parser and one chunked decoder for both directions, and the
  # server's poller (os/), compiled into this extension too.
  codec = Dir.chdir(__dir__) do
    Dir["ext/oribi/http/{parser,chunked}.{c,h}", "ext/oribi/http/token.h", "ext/oribi/os/*.{c,h}",
        "ext/oribi/{layers,platform}.rb"]
  end
  s.files = Dir.chdir(__dir__) do
    Dir["lib/**/*.rb", "lib/oribi/report/**/*", "ext/oribi_bench/*.{c,h,rb}", "docs/*.md"] + ["LICENSE"]
  end + codec
  s.extensions = ["ext/oribi_bench/extconf.rb"]
  s.require_paths = ["lib"]
  s.add_dependency "oribi", Oribi::VERSION # `oribi` runs the tools; tune starts Oribi servers
end
