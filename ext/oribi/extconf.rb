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
# A Hash sized for a whole env at once (public from Ruby 3.2; exported before).
have_func("rb_hash_new_capa", "ruby.h") || have_func("rb_hash_new_with_size")
oribi_sources(__dir__, LAYERS)
oribi_makefile("oribi/oribi")
