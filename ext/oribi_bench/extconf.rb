# frozen_string_literal: true

# The load generator of `oribi bench` and `oribi tune`, an extension of its
# own: a worker never loads it. It reads responses with the server's codec
# (ext/oribi/http): one parser and one chunked decoder for both directions.
require "mkmf"
require_relative "../oribi/layers"

oribi_cflags
oribi_sources(__dir__, %w[. ../oribi/http/parser.c ../oribi/http/chunked.c])
$INCFLAGS << " -I$(srcdir)/../oribi"
oribi_makefile("oribi/oribi_bench")
