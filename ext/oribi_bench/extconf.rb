# frozen_string_literal: true

# The load generator of `oribi bench` and `oribi tune`, an extension of its
# own: a worker never loads it. It reads responses with the server's codec
# (ext/oribi/http): one parser and one chunked decoder for both directions.
require "mkmf"
require_relative "../oribi/layers"

oribi_cflags
# TLS (https:// URLs) with OpenSSL when its headers are there (Debian:
# libssl-dev); without, oribi bench says TLS is unavailable.
# ORIBI_NO_TLS=1 builds without it anyway, to check that build.
if ENV["ORIBI_NO_TLS"] != "1" && have_header("openssl/ssl.h") && have_library("crypto", "ERR_get_error") &&
   have_library("ssl", "SSL_new")
  $defs << "-DORIBI_TLS"
end
oribi_sources(__dir__, %w[. ../oribi/http/parser.c ../oribi/http/chunked.c])
$INCFLAGS << " -I$(srcdir)/../oribi"
oribi_makefile("oribi/oribi_bench")
