# frozen_string_literal: true

require "open3"
require "tmpdir"

# Opens a generated HTML page in headless Chromium, the way a reader would:
# one run takes a screenshot, dumps the DOM after the page's scripts ran, and
# collects every console line (a report page should log nothing: an
# uncaught error or a console.error shows up here).
module HeadlessChromium
  Page = Struct.new(:png, :dom, :console, keyword_init: true)

  module_function

  def binary
    @binary ||= %w[chromium chromium-browser google-chrome].find do |name|
      ENV.fetch("PATH", "").split(":").any? { |dir| File.executable?(File.join(dir, name)) }
    end
  end

  def available?
    !binary.nil?
  end

  # Renders html_path; the screenshot goes to png_path. Bounded: Chromium
  # gets its own profile directory and 60 s.
  def render(html_path, png_path, width: 1200, height: 1600)
    Dir.mktmpdir("oribi-chromium") do |profile|
      cmd = ["timeout", "60", binary, "--headless", "--no-sandbox", "--disable-gpu",
             "--user-data-dir=#{profile}", "--enable-logging=stderr", "--v=0",
             "--virtual-time-budget=5000", "--window-size=#{width},#{height}",
             "--screenshot=#{png_path}", "--dump-dom", "file://#{File.expand_path(html_path)}"]
      # not the sanitizer runtime the ASan suite preloads into Ruby
      dom, log, status = Open3.capture3({ "LD_PRELOAD" => nil }, *cmd)
      raise "chromium failed (#{status}): #{log[-2000..] || log}" unless status.success?

      Page.new(png: png_path, dom: dom, console: log.lines.grep(/:CONSOLE[:(]/).map(&:strip))
    end
  end
end
