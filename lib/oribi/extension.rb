# frozen_string_literal: true

require "digest"
require "fileutils"
require "rbconfig"
require "tmpdir"

module Oribi
  # Loads one of the gem's C extensions (oribi, oribi_bench). `gem install`
  # and Bundler's git sources build them at install time; a Bundler `path:`
  # source, or a checkout used as is, does not. Then the extension is built
  # on first load from the gem's own ext/ sources, with nothing but the
  # gem, a compiler and Ruby's headers, into a cache directory keyed by the
  # sources and the Ruby it is built for:
  #
  #   $ORIBI_BUILD_DIR, else $XDG_CACHE_HOME/oribi, else ~/.cache/oribi
  #
  # Concurrent first loads (workers, parallel test processes) wait on one
  # lock and build once. To build ahead of the first start (a deploy step,
  # a read-only container): `bundle exec ruby -roribi -e0`.
  module Extension
    ROOT = File.expand_path("../..", __dir__)

    module_function

    def require!(name)
      require "oribi/#{name}"
    rescue LoadError => e
      src = File.join(ROOT, "ext", name)
      raise LoadError, "#{e.message}: and no sources to build it from in #{src}" unless File.file?(File.join(src, "extconf.rb"))

      require built(name, src)
    end

    # The .so for the sources in src, built unless the cache has it.
    def built(name, src)
      dir = File.join(cache_root, "#{name}-#{key(src)}")
      so = File.join(dir, "#{name}.#{RbConfig::CONFIG['DLEXT']}")
      return so if File.file?(so)

      FileUtils.mkdir_p(dir)
      File.open(File.join(dir, ".lock"), File::RDWR | File::CREAT, 0o644) do |lock|
        lock.flock(File::LOCK_EX)
        build(name, src, dir, so) unless File.file?(so) # another process may have built it meanwhile
      end
      so
    end

    def cache_root
      ENV.fetch("ORIBI_BUILD_DIR") do
        File.join(ENV.fetch("XDG_CACHE_HOME") { File.join(Dir.home, ".cache") }, "oribi")
      end
    end

    # Sources (the extension's and the shared codec's) and the Ruby ABI.
    def key(src)
      d = Digest::SHA256.new
      Dir[File.join(ROOT, "ext", "**", "*.{c,h,rb}")].sort.each { |f| d << f.delete_prefix(ROOT) << File.binread(f) }
      d << RUBY_VERSION << RbConfig::CONFIG["arch"] << src.delete_prefix(ROOT)
      d.hexdigest[0, 16]
    end

    def build(name, src, dir, so)
      warn "oribi: building the #{name} C extension for Ruby #{RUBY_VERSION} (once, about a minute) into #{dir}"
      Dir.mktmpdir("oribi-build") do |tmp|
        log = File.join(dir, "build.log")
        ok = system(RbConfig.ruby, File.join(src, "extconf.rb"), chdir: tmp, %i[out err] => log) &&
             system("make", "-j2", chdir: tmp, %i[out err] => [log, "a"])
        raise LoadError, "oribi: building the #{name} C extension failed (a compiler and Ruby's headers are needed: " \
                         "Debian's build-essential ruby-dev); see #{log}" unless ok

        built = File.join(tmp, File.basename(so))
        FileUtils.cp(built, "#{so}.tmp")
        File.rename("#{so}.tmp", so) # whole or not at all for the next loader
      end
      warn "oribi: built #{so}"
    end
  end
end
