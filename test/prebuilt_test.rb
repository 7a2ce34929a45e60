# frozen_string_literal: true

require "test_helper"
require "open3"

# A platform gem's extensions (lib/oribi/extension.rb): one prebuilt .so
# per Ruby minor version in lib/oribi/<minor>/, this Ruby's loaded, another
# Ruby refused with the way to the source gem. `.ci/native test` installs
# the real gems on each Ruby.
class PrebuiltTest < Minitest::Test
  Extension = Oribi::Extension
  MINOR = RUBY_VERSION[/\A\d+\.\d+/]
  DLEXT = RbConfig::CONFIG["DLEXT"]

  # A gem's lib/oribi with these minors' oribi.so (contents: the block's)
  def layout(dir, minors)
    minors.each do |m|
      FileUtils.mkdir_p(File.join(dir, m))
      File.binwrite(File.join(dir, m, "oribi.#{DLEXT}"), yield(m))
    end
    dir
  end

  def loaded_so = $LOADED_FEATURES.grep(%r{/oribi\.#{DLEXT}\z}).first || flunk("no oribi.#{DLEXT} loaded")

  def test_a_ruby_the_gem_was_not_built_for_is_refused_naming_the_source_gem
    Dir.mktmpdir do |d|
      layout(d, %w[3.10 2.7 9.9]) { "not loaded" }
      minors = Extension.prebuilt("oribi", d)
      assert_equal %w[2.7 3.10 9.9], minors
      e = assert_raises(LoadError) { Extension.require_prebuilt("oribi", minors, dir: d, ruby: "3.2.9") }
      assert_match(/prebuilt for Ruby 2\.7, 3\.10, 9\.9, not for this Ruby 3\.2\.9/, e.message)
      assert_includes e.message, "`gem install oribi --platform ruby`"
      assert_includes e.message, "`bundle config set --local force_ruby_platform true`"
    end
  end

  def test_a_prebuilt_extension_that_does_not_load_says_what_it_needs
    Dir.mktmpdir do |d|
      layout(d, [MINOR]) { "not an ELF file" }
      e = assert_raises(LoadError) { Extension.require_prebuilt("oribi", [MINOR], dir: d) }
      assert_match(/prebuilt for Ruby #{Regexp.escape(MINOR)} does not load \(.*\); it needs Linux with glibc 2\.33/,
                   e.message)
      assert_includes e.message, "`gem install oribi --platform ruby`"
    end
  end

  # A Ruby process given a gem's lib/ with this Ruby's extension (the one
  # this suite runs on) and another's loads this Ruby's, builds nothing
  def test_this_rubys_prebuilt_extension_is_loaded
    Dir.mktmpdir do |d|
      lib = File.join(d, "lib")
      FileUtils.cp_r(File.join(ROOT, "lib"), lib)
      FileUtils.rm_f(Dir[File.join(lib, "oribi", "*.#{DLEXT}")])
      so = loaded_so
      layout(File.join(lib, "oribi"), [MINOR, "9.9"]) { |m| m == MINOR ? File.binread(so) : "not loaded" }
      env = { "ORIBI_BUILD" => "0", "ORIBI_BUILD_DIR" => File.join(d, "cache") }
      out, status = Open3.capture2e(user_env(env), RbConfig.ruby, "-I", lib, "-roribi", "-e",
                                    "puts $LOADED_FEATURES.grep(/oribi\\.#{DLEXT}\\z/), Oribi::EVENT_LOOP")
      assert status.success?, out
      assert_equal [File.join(lib, "oribi", MINOR, "oribi.#{DLEXT}"), Oribi::EVENT_LOOP], out.lines.map(&:chomp)
      refute File.exist?(File.join(d, "cache")), "nothing built"
    end
  end
end
