# frozen_string_literal: true

# What the platform offers the C code (both extensions' extconf.rb, mkmf
# loaded): each Linux call the engine and the load generator would use is
# looked for by a check, never by the OS's name, and handed to the C code as
# an ORIBI_HAVE_* define; without it the code takes its POSIX fallback
# (ext/oribi/os/). And the event loop: ORIBI_POLL_EPOLL or ORIBI_POLL_KQUEUE.
#
#   ORIBI_EVENT_LOOP=epoll|kqueue  the loop (default: epoll where the
#                                  headers have it, else kqueue; on Linux
#                                  kqueue means libkqueue, libkqueue-dev)
#   ORIBI_PORTABLE=1               only what macOS and the BSDs offer too:
#                                  every Linux-only check is skipped, so
#                                  each fallback is built (and tested, on
#                                  Linux); implies kqueue
# A signature check compiles only where the headers declare that signature.
STRICT = "-Werror=implicit-function-declaration -Werror=incompatible-pointer-types -Werror=int-conversion"

PLATFORM_CHECKS = {
  # name => [Linux only?, check]
  "ACCEPT4" => [true, -> { have_func("accept4", "sys/socket.h") }],
  "SOCK_NONBLOCK" => [true, -> { have_macro("SOCK_NONBLOCK", "sys/socket.h") }],
  "MSG_NOSIGNAL" => [true, -> { have_macro("MSG_NOSIGNAL", "sys/socket.h") }],
  "MSG_MORE" => [true, -> { have_macro("MSG_MORE", "sys/socket.h") }],
  "EVENTFD" => [true, -> { have_header("sys/eventfd.h") }],
  "O_TMPFILE" => [true, -> { have_macro("O_TMPFILE", "fcntl.h") }],
  "MKOSTEMP" => [false, -> { have_func("mkostemp", "stdlib.h") }],
  "CLOCK_MONOTONIC_COARSE" => [true, -> { have_macro("CLOCK_MONOTONIC_COARSE", "time.h") }],
  "CLOCK_MONOTONIC_FAST" => [false, -> { have_macro("CLOCK_MONOTONIC_FAST", "time.h") }],
  "LINUX_SENDFILE" => [true, -> { have_header("sys/sendfile.h") && have_func("sendfile", "sys/sendfile.h") }],
  "BSD_SENDFILE" => [false, lambda {
    checking_for("sendfile(2) as FreeBSD has it") do
      try_compile(<<~C, STRICT)
        #include <sys/types.h>
        #include <sys/socket.h>
        #include <sys/uio.h>
        int main(void) { off_t sent; return sendfile(0, 1, 0, 1, NULL, &sent, 0); }
      C
    end
  }],
  "DARWIN_SENDFILE" => [false, lambda {
    checking_for("sendfile(2) as macOS has it") do
      try_compile(<<~C, STRICT)
        #include <sys/types.h>
        #include <sys/socket.h>
        #include <sys/uio.h>
        int main(void) { off_t len = 1; return sendfile(0, 1, 0, &len, NULL, 0); }
      C
    end
  }],
  "EPOLL_PWAIT2" => [true, -> { have_func("epoll_pwait2", "sys/epoll.h") }],
  "PR_SET_CHILD_SUBREAPER" => [true, -> { have_macro("PR_SET_CHILD_SUBREAPER", "sys/prctl.h") }],
  "PROC_REAP_ACQUIRE" => [false, -> { have_macro("PROC_REAP_ACQUIRE", %w[sys/types.h sys/procctl.h]) }],
  "TCP_INFO_QUEUE" => [true, -> { have_struct_member("struct tcp_info", "tcpi_sacked", "netinet/tcp.h") }],
  "SOCK_DIAG" => [true, -> { have_header("linux/unix_diag.h") }],
  "SO_LISTENQLEN" => [false, -> { have_macro("SO_LISTENQLEN", "sys/socket.h") }],
}.freeze

def oribi_platform
  portable = ENV["ORIBI_PORTABLE"] == "1"
  PLATFORM_CHECKS.each do |name, (linux_only, check)|
    next if portable && linux_only

    $defs << "-DORIBI_HAVE_#{name}" if check.call
  end
  loop = ENV.fetch("ORIBI_EVENT_LOOP") { portable || !have_header("sys/epoll.h") ? "kqueue" : "epoll" }
  case loop
  when "epoll"
    abort "oribi: ORIBI_PORTABLE=1 builds the kqueue loop, not epoll" if portable
    abort "oribi: ORIBI_EVENT_LOOP=epoll, but there is no sys/epoll.h" unless have_header("sys/epoll.h")
  when "kqueue" then oribi_kqueue
  else abort "oribi: ORIBI_EVENT_LOOP=#{loop}: epoll or kqueue"
  end
  $defs << "-DORIBI_POLL_#{loop.upcase}"
  $defs << "-DORIBI_PORTABLE" if portable
end

# kqueue from the system's headers (macOS, the BSDs), else libkqueue's.
def oribi_kqueue
  return if have_header("sys/event.h")
  return $defs << "-DORIBI_LIBKQUEUE" if pkg_config("libkqueue") && have_header("sys/event.h") &&
                                        have_library("kqueue", "kqueue", "sys/event.h")

  abort "oribi: a kqueue event loop needs sys/event.h: on Linux, libkqueue (Debian: libkqueue-dev)"
end
