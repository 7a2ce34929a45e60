# frozen_string_literal: true

# Loaded before an extconf.rb (`ruby -r ./.ci/cross.rb ext/oribi/extconf.rb`)
# to build for another CPU or another Ruby than this one: mkmf then reads
# the target Ruby's rbconfig.rb, found in ORIBI_CROSS_ROOT, a Debian tree
# holding that Ruby (.ci/arm64's chroot, .ci/native's trees). Its paths are
# all under that root (rbconfig.rb takes its prefix from where it lies), its
# CC is Debian's triplet-named compiler (x86_64-linux-gnu-gcc, or
# aarch64-linux-gnu-gcc from the gcc-aarch64-linux-gnu package), and
# --sysroot makes that compiler take libc's headers, start files and
# libraries from ORIBI_CROSS_SYSROOT (default: the same root): every check
# and the link see the target's C library, not this machine's.
#
# Another Ruby version than this one's is read as rake-compiler does for
# the fat gems of Nokogiri and others: RUBY_VERSION says the target's while
# rbconfig.rb loads (it refuses another), and the few settings whose form
# changed between versions are put in the form this mkmf expects.
root = ENV.fetch("ORIBI_CROSS_ROOT")
sysroot = ENV.fetch("ORIBI_CROSS_SYSROOT", root)
rbconfig = Dir[File.join(root, "usr/lib/*/ruby/[0-9]*/rbconfig.rb")].max
abort "cross.rb: no Ruby (rbconfig.rb) under #{root}" unless rbconfig
target = File.read(rbconfig)[/ruby lib version \(([\d.]+)\)/, 1] or abort "cross.rb: no version in #{rbconfig}"

Object.send(:remove_const, :RbConfig)
if target != RUBY_VERSION
  verbose = $VERBOSE
  $VERBOSE = nil
  Object.send(:remove_const, :RUBY_VERSION)
  Object.const_set(:RUBY_VERSION, target.freeze)
  $VERBOSE = verbose
end
load rbconfig

[RbConfig::MAKEFILE_CONFIG, RbConfig::CONFIG].each do |c|
  c["CC"] = "#{c['CC']} --sysroot=#{sysroot}"
  # Programs mkmf links for its checks are never run here: no library path
  # of the target's for this machine's compiler to load
  c["LIBPATHENV"] = ""
  # " -L%s" before Ruby 3.4, "-L%s" since, and mkmf joins them as they are
  c["LIBPATHFLAG"] = " #{c['LIBPATHFLAG'].strip}"
  next if sysroot == root

  # The checks link against the target's libruby, whose own needs may be of
  # a newer C library than the sysroot's (a Ruby from a newer Debian): not
  # looked into. The extension itself is linked without libruby
  # (.ci/native); its root holds Ruby's files only, so that nothing links
  # against another C library than the sysroot's.
  c["LDFLAGS"] = "#{c['LDFLAGS']} -Wl,--allow-shlib-undefined"
end
