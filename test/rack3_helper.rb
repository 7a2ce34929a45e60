# frozen_string_literal: true

require "test_helper"
require "digest/md5"

# Files that test/apps/rack3.ru serves (its $ORIBI_TEST_FILES), made once.
module Rack3Files
  DIR = Dir.mktmpdir("oribi-files")
  SMALL = Random.new(3).bytes(5_000)
  LARGE = Random.new(4).bytes(3 * 1024 * 1024 + 17)
  File.binwrite(File.join(DIR, "small.bin"), SMALL)
  File.binwrite(File.join(DIR, "large.bin"), LARGE)
  File.binwrite(File.join(DIR, "empty.bin"), "")
  # sparse: costs no disk, and far more than any socket buffer holds
  File.open(File.join(DIR, "huge.bin"), "w") { |f| f.truncate(256 * 1024 * 1024) }
  Minitest.after_run { FileUtils.rm_rf(DIR) }

  def self.server_env = { "ORIBI_TEST_FILES" => DIR }
end
