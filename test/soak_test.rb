# frozen_string_literal: true

require "test_helper"
require "open3"

# The soak of bench/soak.rb, shortened to ORIBI_SOAK_SECONDS (default 60):
# mixed load on two workers, then no RSS growth past the bound after the
# warm-up, no fd left open once the clients are gone, no worker replaced,
# every answer as expected. The 30-minute run is in docs/HARDENING.md.
class SoakTest < Minitest::Test
  def test_soak
    seconds = Integer(ENV.fetch("ORIBI_SOAK_SECONDS", "60"))
    cmd = [RbConfig.ruby, "-I", File.join(ROOT, "lib"), File.join(ROOT, "bench/soak.rb"),
           "--duration", seconds.to_s, "--warmup", (seconds / 3).to_s, "--interval", "2",
           # ASan's quarantine keeps freed memory: RSS says nothing there
           "--max-rss-growth", ENV["ORIBI_SANITIZE"] ? "100000" : "24"]
    out = +""
    status = Open3.popen2e(*cmd) do |stdin, output, wait|
      stdin.close
      reader = Thread.new { output.each_line { |l| out << l } }
      unless wait.join(seconds + 90)
        Process.kill(:TERM, wait.pid) # soak.rb stops its server in an ensure
        wait.join(20)
      end
      reader.join(5)
      wait.value
    end
    # the last progress lines, then the report (with the server's log)
    assert status.success?, "soak failed:\n#{out.split("\r").last(3).join("\n")}"
    assert_match(/^soak: OK$/, out)
    assert_match(/^soak: \d+ operations .* 0 unexpected$/, out)
  end
end
