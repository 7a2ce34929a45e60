# frozen_string_literal: true

# Build settings shared by the two extensions' extconf.rb (mkmf is loaded).

# ORIBI_SANITIZE=1 builds with ASan+UBSan (rake test:asan), =thread with
# ThreadSanitizer (rake test:tsan_ruby).
def oribi_cflags
  $CFLAGS << " -O2 -Wall -Wextra -std=gnu11 -D_GNU_SOURCE -fvisibility=hidden"
  $CFLAGS << " -Wno-unused-parameter -Wno-missing-field-initializers"
  case ENV.fetch("ORIBI_SANITIZE", nil)
  when "1" then oribi_asan
  when "thread" then oribi_tsan
  end
end

def oribi_asan

  # asan-stack=0: Ruby raises with __builtin_longjmp, which ASan cannot see;
  # an exception crossing our frames (an app raising in body.call, Timeout
  # interrupting Loadgen.run) would leave their stack redzones poisoned and
  # a later call writing there would be reported falsely. Heap checks stay.
  $CFLAGS << " -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"
  $CFLAGS << " --param asan-stack=0"
  $LDFLAGS << " -fsanitize=address,undefined"
end

# Only the extension is instrumented; Ruby is not. TSan still sees the GVL
# (a pthread mutex and condition variables, whose calls it intercepts), so
# an access of ours from an app thread and one from the dispatcher running
# the loop without the GVL are ordered only by what our code does.
def oribi_tsan
  $CFLAGS << " -O1 -g -fno-omit-frame-pointer -fsanitize=thread"
  $LDFLAGS << " -fsanitize=thread"
end

# Compiles the .c files of dirs (relative to srcdir, the folder of the
# extconf.rb being run) into one object directory: make finds them through
# VPATH, so basenames must not repeat. An entry ending in .c is that one
# file (the load generator takes two files of the server's codec).
def oribi_sources(srcdir, dirs)
  files = dirs.flat_map { |d| d.end_with?(".c") ? [File.join(srcdir, d)] : Dir[File.join(srcdir, d, "*.c")].sort }
  names = files.map { |f| File.basename(f) }
  dup = names.group_by(&:itself).select { |_, v| v.size > 1 }.keys
  abort "source names repeat across layers: #{dup.join(', ')}" unless dup.empty?
  $srcs = names
  $objs = names.map { |n| n.sub(/\.c\z/, ".o") }
  dirs.map { |d| d.end_with?(".c") ? File.dirname(d) : d }.uniq.each { |d| $VPATH << "$(srcdir)/#{d}" }
  $INCFLAGS << " -I$(srcdir)"
  # An absolute srcdir: `gem install` runs extconf.rb in its own folder
  # (srcdir "."), and make does not find sources through a VPATH entry
  # like ./../oribi/http.
  $srcdir = RbConfig::MAKEFILE_CONFIG["srcdir"] = srcdir
end

# create_makefile, plus header dependencies: mkmf's Makefile rebuilds an
# object only when its .c changes, and an object built against an older
# header (a struct that grew a field) makes a .so that crashes.
#
# ORIBI_WERROR=1 makes every warning an error (CI, on each Ruby and compiler
# it builds with; -Wwrite-strings as a Ruby built from upstream adds it):
# here, after mkmf's checks, whose test programs warn by design.
def oribi_makefile(target)
  $CFLAGS << " -MMD -MP"
  $CFLAGS << " -Wwrite-strings -Werror" if ENV["ORIBI_WERROR"] == "1"
  create_makefile(target)
  File.open("Makefile", "a") { |f| f.puts "-include $(OBJS:.o=.d)" }
end
