# frozen_string_literal: true

require "stringio"
require "timeout"

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
