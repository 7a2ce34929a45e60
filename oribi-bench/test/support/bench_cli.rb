# frozen_string_literal: true

# What every bench CLI test loads: minitest, the bench and a JSON reader.
$LOAD_PATH.unshift(File.expand_path("../../lib", __dir__), File.expand_path("../../../lib", __dir__))
require "minitest/autorun"
require "json"
require "stringio"
require "timeout"
require "oribi/bench"

# Runs `oribi bench ARGV` in this process, as exe/oribi would, within a
# time limit: [exit status, stdout, stderr].
module BenchCLIHelper
  def bench(*argv, limit: 30)
    out = StringIO.new
    err = StringIO.new
    rc = Timeout.timeout(limit) { Oribi::Bench::CLI.run(argv, out: out, err: err) }
    [rc, out.string, err.string]
  end
end
