# frozen_string_literal: true

require "mkmf"

# ORIBI_SANITIZE=1 builds with ASan+UBSan (rake test:asan).
$CFLAGS << " -O2 -Wall -Wextra -std=gnu11 -D_GNU_SOURCE -fvisibility=hidden"
$CFLAGS << " -Wno-unused-parameter -Wno-missing-field-initializers"
if ENV["ORIBI_SANITIZE"] == "1"
  # asan-stack=0: Ruby raises with __builtin_longjmp, which ASan cannot see;
  # an exception crossing our frames (an app raising in body.call, Timeout
  # interrupting Loadgen.run) would leave their stack redzones poisoned and
  # a later call writing there would be reported falsely. Heap checks stay.
  $CFLAGS << " -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"
  $CFLAGS << " --param asan-stack=0"
  $LDFLAGS << " -fsanitize=address,undefined"
end

abort "oribi needs Linux epoll" unless have_header("sys/epoll.h")
have_func("accept4", "sys/socket.h")
# A Hash sized for a whole env at once (public from Ruby 3.2; exported before).
have_func("rb_hash_new_capa", "ruby.h") || have_func("rb_hash_new_with_size")

create_makefile("oribi/oribi")
