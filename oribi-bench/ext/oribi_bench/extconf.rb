# frozen_string_literal: true

# The load generator of `oribi bench` and `oribi tune`, an extension of its
# own: a worker never loads it. It reads responses with the server's codec
# (ext/oribi/http): one parser and one chunked decoder for both directions.
require "mkmf"
require_relative "../oribi/layers"
require_relative "../oribi/platform"

oribi_cflags
oribi_platform
# TLS (https:// URLs) with OpenSSL when its headers are there (Debian:
# libssl-dev); without, oribi bench says TLS is unavailable.
# ORIBI_NO_TLS=1 builds without it anyway, to check that build.
if ENV["ORIBI_NO_TLS"] != "1" && have_header("openssl/ssl.h") && have_library("crypto", "ERR_get_error") &&
   have_library("ssl", "SSL_new")
  $defs << "-DORIBI_TLS"
end
oribi_sources(__dir__, %w[. ../oribi/http/parser.c ../oribi/http/chunked.c ../oribi/os/wakeup.c ../oribi/os/poller_kqueue.c])
$INCFLAGS << " -I$(srcdir)/../oribi"
oribi_makefile("oribi/oribi_bench")
