# frozen_string_literal: true

require "mkmf"
require_relative "layers"
require_relative "platform"

# The server's extension, in layers (docs/DESIGN.md): http/ (the codec,
# pure C), os/ (what the platform offers: readiness, wakeups, sockets,
# sendfile, clocks), loop/ (the worker's event loop, pure C), ruby/ (the
# Ruby face).
# Sources are named after the layer's folder (#include "http/parser.h").
LAYERS = %w[http os loop ruby].freeze

oribi_cflags
oribi_platform
# TLS listeners (ssl://, ssl_bind) with the system's OpenSSL (Debian:
# libssl-dev); without it such a bind is refused with the reason.
# ORIBI_NO_TLS=1 builds without it anyway, to check that build.
if ENV["ORIBI_NO_TLS"] != "1" && have_header("openssl/ssl.h") && have_library("crypto", "ERR_get_error") &&
   have_library("ssl", "SSL_new")
  $defs << "-DORIBI_HAVE_OPENSSL"
end
# A Hash sized for a whole env at once (public from Ruby 3.2; exported before).
have_func("rb_hash_new_capa", "ruby.h") || have_func("rb_hash_new_with_size")
oribi_sources(__dir__, LAYERS)
oribi_makefile("oribi/oribi")
