# frozen_string_literal: true

require "oribi/extension"
Oribi::Extension.require!("oribi_bench", root: File.expand_path("../..", __dir__))
require "oribi/bench/options"

module Oribi
  # The load generator (ext/oribi_bench, C): `oribi bench`, `oribi tune`,
  # the bench scripts and the tests drive it through run.
  module Loadgen
    # Runs the load (see Loadgen.engine_run in loadgen_ruby.c for the keys
    # and the block); a value left out is Oribi::Bench::OPTIONS' default, so
    # the defaults are written once, there.
    def self.run(opts, &progress)
      engine_run(Bench.run_defaults(opts).merge(opts), &progress)
    end
  end
end
