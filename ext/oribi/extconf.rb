# frozen_string_literal: true

require "mkmf"
require_relative "layers"

# The server's extension, in layers (docs/DESIGN.md): http/ (the codec,
# pure C), loop/ (the worker's epoll loop, pure C), ruby/ (the Ruby face).
# Sources are named after the layer's folder (#include "http/parser.h").
LAYERS = %w[http loop ruby].freeze

oribi_cflags
abort "oribi needs Linux epoll" unless have_header("sys/epoll.h")
have_func("accept4", "sys/socket.h")
# A Hash sized for a whole env at once (public from Ruby 3.2; exported before).
have_func("rb_hash_new_capa", "ruby.h") || have_func("rb_hash_new_with_size")
oribi_sources(__dir__, LAYERS)
oribi_makefile("oribi/oribi")
