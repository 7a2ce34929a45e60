# frozen_string_literal: true

# The load generator of `oribi bench` and `oribi tune`, an extension of its
# own: a worker never loads it. It takes the server's token tables from
# ext/oribi/http.
require "mkmf"
require_relative "../oribi/layers"

oribi_cflags
oribi_sources(__dir__, %w[.])
$INCFLAGS << " -I$(srcdir)/../oribi"
oribi_makefile("oribi/oribi_bench")
