# frozen_string_literal: true

# Loaded before an extconf.rb (`ruby -r ./.ci/cross.rb ext/oribi/extconf.rb`)
# to build for another CPU with a cross compiler: mkmf then reads the
# target Ruby's rbconfig.rb, found in ORIBI_CROSS_ROOT, a Debian tree of that
# CPU (.ci/arm64's chroot). Its paths are all under that root (rbconfig.rb
# takes its prefix from where it lies), its CC is Debian's triplet-named
# compiler (aarch64-linux-gnu-gcc, the gcc-aarch64-linux-gnu package
# here), and --sysroot makes that compiler take libc's headers, start files
# and libraries from the root too: every check and the link see the
# target's system, not this machine's. This Ruby's mkmf must be the target
# Ruby's version.
root = ENV.fetch("ORIBI_CROSS_ROOT")
rbconfig = Dir[File.join(root, "usr/lib/*/ruby/[0-9]*/rbconfig.rb")].first
abort "cross.rb: no Ruby (rbconfig.rb) under #{root}" unless rbconfig

Object.send(:remove_const, :RbConfig)
load rbconfig
[RbConfig::MAKEFILE_CONFIG, RbConfig::CONFIG].each { |c| c["CC"] = "#{c['CC']} --sysroot=#{root}" }
target = RbConfig::CONFIG.values_at("MAJOR", "MINOR").join(".")
abort "cross.rb: #{rbconfig} is Ruby #{target}'s; this is #{RUBY_VERSION}'s mkmf" unless RUBY_VERSION.start_with?("#{target}.")
