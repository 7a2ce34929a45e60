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
  # lock and build once, saying so on stderr. A production boot
  # (RACK_ENV, RAILS_ENV or APP_ENV is production) never builds: a minute
  # of compiling, or a missing compiler, would surprise there. It fails at
  # once, naming the step that builds ahead of the first start (a deploy
  # step, a container image): `ORIBI_BUILD=1 bundle exec ruby -e 'require "oribi"'` (not
  # `-roribi`: Ruby takes -r before Bundler puts a path: gem on the load path).
  # ORIBI_BUILD=1 builds in any environment, ORIBI_BUILD=0 in none.
  #
  # A platform gem (x86_64-linux, aarch64-linux: `rake native`) carries the
  # server's extension prebuilt instead, one per Ruby minor version in
  # lib/oribi/<minor>/, and no sources: this Ruby's is loaded, and a Ruby
  # it was not built for is refused with the way to the source gem.
  module Extension
    ROOT = File.expand_path("../..", __dir__)
    PRODUCTION_ENVS = %w[RACK_ENV RAILS_ENV APP_ENV].freeze
    # What ext/*/extconf.rb reads besides the sources: another value is
    # another build.
    BUILD_ENV = %w[ORIBI_EVENT_LOOP ORIBI_PORTABLE ORIBI_SANITIZE ORIBI_NO_TLS].freeze

    module_function

    # root: the gem whose ext/NAME it is (the tools gem's own, for oribi_bench)
    def require!(name, root: ROOT)
      minors = prebuilt(name)
      return require_prebuilt(name, minors) unless minors.empty?

      begin
        require "oribi/#{name}"
      rescue LoadError => e
        src = File.join(root, "ext", name)
        unless File.file?(File.join(src, "extconf.rb"))
          raise LoadError, "#{e.message}: and no sources to build it from in #{src}"
        end

        require built(name, src, root)
      end
    end

    # The Ruby minor versions ("3.3") a platform gem has name prebuilt for
    def prebuilt(name, dir = __dir__)
      Dir[File.join(dir, "[0-9]*.[0-9]*", "#{name}.#{RbConfig::CONFIG['DLEXT']}")].map { |f| File.basename(File.dirname(f)) }
                                                                                   .sort_by { |v| v.split(".").map(&:to_i) }
    end

    SOURCE_GEM = "install the source gem, which builds the extension for this Ruby at install time (a C compiler " \
                 "needed): `gem install oribi --platform ruby`, or with Bundler " \
                 "`bundle config set --local force_ruby_platform true` before `bundle install`"

    def require_prebuilt(name, minors, dir: __dir__, ruby: RUBY_VERSION)
      minor = ruby[/\A\d+\.\d+/]
      unless minors.include?(minor)
        raise LoadError, "oribi: this gem#{platform} has its #{name} C extension prebuilt for Ruby " \
                         "#{minors.join(', ')}, not for this Ruby #{ruby}: #{SOURCE_GEM}"
      end

      begin
        require File.join(dir, minor, name)
      rescue LoadError => e
        raise LoadError, "oribi: the #{name} C extension this gem#{platform} has prebuilt for Ruby #{minor} does not " \
                         "load (#{e.message}); it needs Linux with glibc 2.33 or later (not musl): #{SOURCE_GEM}"
      end
    end

    def platform
      spec = Gem.loaded_specs["oribi"] if defined?(Gem)
      spec && spec.platform.to_s != "ruby" ? " (#{spec.platform})" : ""
    end

    def build_allowed?
      case ENV.fetch("ORIBI_BUILD", "")
      when "1" then true
      when "0" then false
      else PRODUCTION_ENVS.none? { |k| ENV[k] == "production" }
      end
    end

    def refuse(name)
      why = ENV["ORIBI_BUILD"] == "0" ? "ORIBI_BUILD=0" : "a production environment"
      raise LoadError, "oribi: the #{name} C extension is not built for Ruby #{RUBY_VERSION} in #{cache_root}, and " \
                       "#{why} does not build it at boot: build it ahead with " \
                       "`ORIBI_BUILD=1 bundle exec ruby -e 'require \"oribi\"'` (as the same user, with the same ORIBI_BUILD_DIR), " \
                       "or install the gem from a gem or git source, which builds it at install time"
    end

    # The .so for the sources in src, built unless the cache has it.
    def built(name, src, root = ROOT)
      dir = File.join(cache_root, "#{name}-#{key(src, root)}")
      so = File.join(dir, "#{name}.#{RbConfig::CONFIG['DLEXT']}")
      return so if File.file?(so)

      refuse(name) unless build_allowed?
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

    # Sources (the extension's and the shared codec's, which the tools gem
    # reaches through a link: ext/*/ follows it) and the Ruby ABI.
    def key(src, root = ROOT)
      d = Digest::SHA256.new
      Dir[File.join(root, "ext", "*", "**", "*.{c,h,rb}")].sort.each { |f| d << f.delete_prefix(root) << File.binread(f) }
      d << RUBY_VERSION << RbConfig::CONFIG["arch"] << src.delete_prefix(root)
      BUILD_ENV.each { |k| d << "#{k}=#{ENV.fetch(k, '')}" }
      d.hexdigest[0, 16]
    end

    def build(name, src, dir, so)
      warn "oribi: building the #{name} C extension for Ruby #{RUBY_VERSION} (once, about a minute) into #{dir}"
      Dir.mktmpdir("oribi-build") do |tmp|
        log = File.join(dir, "build.log")
        ok = system(RbConfig.ruby, File.join(src, "extconf.rb"), chdir: tmp, %i[out err] => log) &&
             system("make", "-j2", chdir: tmp, %i[out err] => [log, "a"])
        unless ok
          raise LoadError, "oribi: building the #{name} C extension failed: a C compiler, make and Ruby's headers are " \
                           "needed (Debian, Ubuntu: apt install build-essential ruby-dev; Fedora: dnf install gcc make " \
                           "ruby-devel; Alpine: apk add build-base ruby-dev; macOS: xcode-select --install). " \
                           "The compiler said (#{log}):\n#{File.readlines(log).last(15).join}"
        end

        built = File.join(tmp, File.basename(so))
        FileUtils.cp(built, "#{so}.tmp")
        File.rename("#{so}.tmp", so) # whole or not at all for the next loader
      end
      warn "oribi: built #{so}"
    end
  end
end
