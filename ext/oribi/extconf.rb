# frozen_string_literal: true

require "mkmf"

# ORIBI_SANITIZE=1 builds with ASan+UBSan (rake test:asan).
$CFLAGS << " -O2 -Wall -Wextra -std=gnu11 -D_GNU_SOURCE -fvisibility=hidden"
$CFLAGS << " -Wno-unused-parameter -Wno-missing-field-initializers"
if ENV["ORIBI_SANITIZE"] == "1"
  $CFLAGS << " -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"
  $LDFLAGS << " -fsanitize=address,undefined"
end

abort "oribi needs Linux epoll" unless have_header("sys/epoll.h")
have_func("accept4", "sys/socket.h")

create_makefile("oribi/oribi")
