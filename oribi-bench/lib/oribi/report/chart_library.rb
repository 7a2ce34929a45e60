# frozen_string_literal: true

module Oribi
  module Report
    # The charting library (uPlot, MIT, lib/oribi/report/uplot/) as inline
    # <style> and <script> for a self-contained HTML page: reports open from
    # a file or a CI artifact with no network.
    module ChartLibrary
      DIR = File.join(__dir__, "uplot")

      module_function

      # The <style> and <script> elements to put in a page's <head>.
      def head
        css = File.read(File.join(DIR, "uPlot.min.css"))
        js = File.read(File.join(DIR, "uPlot.iife.min.js")).gsub("</script", "<\\/script")
        "<style>\n#{css}\n</style>\n<script>\n#{js}\n</script>"
      end
    end
  end
end
