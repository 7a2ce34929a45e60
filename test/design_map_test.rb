# frozen_string_literal: true

require "minitest/autorun"

# docs/DESIGN.md's "Where each concept lives" names every source file, and
# only files that exist: a file added, moved or removed without the map
# fails here.
class DesignMapTest < Minitest::Test
  ROOT = File.expand_path("..", __dir__)
  SOURCES = %w[ext/**/*.{c,h,rb} lib/**/*.rb exe/* oribi-bench/ext/oribi_bench/*.{c,h,rb} oribi-bench/lib/**/*.rb].freeze

  # The paths a map row names: `dir/file` sets the row's folder, a bare
  # `file` is in it, `name.{c,h}` is both.
  def named
    map = File.read(File.join(ROOT, "docs/DESIGN.md"))[/^## Where each concept lives\n(.*?)(?=^## |\z)/m, 1]
    refute_nil map, "DESIGN.md has no map"
    map.each_line.grep(/\A\|/).flat_map do |row|
      dir = nil
      row.scan(/`([\w.\/{},-]+)`/).flatten.filter_map do |name|
        if name.include?("/")
          dir = File.dirname(name)
          name
        elsif dir && name.match?(/\.(\w+|\{)/)
          File.join(dir, name)
        end
      end
    end.flat_map { |path| expand(path) }
  end

  def expand(path)
    m = path.match(/\A(.*)\{([^}]*)\}(.*)\z/) or return [path]
    m[2].split(",").map { |alt| "#{m[1]}#{alt}#{m[3]}" }
  end

  def test_every_source_file_is_in_the_map
    files = Dir.chdir(ROOT) { Dir[*SOURCES] }
    assert_operator files.size, :>, 100
    assert_empty files - named, "source files DESIGN.md's map does not name"
  end

  def test_the_map_names_only_files_that_exist
    assert_empty named.reject { |path| File.file?(File.join(ROOT, path)) }, "DESIGN.md's map names what is not there"
  end
end
