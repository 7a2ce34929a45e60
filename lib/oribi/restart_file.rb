# frozen_string_literal: true

module Oribi
  # restart_file (`bin/rails restart` touches tmp/restart.txt): the master
  # looks once a second, and a new mtime restarts with the app's new code.
  # A file that is missing at start and then made counts as touched; one
  # that goes away does not.
  class RestartFile
    attr_reader :path

    # path: nil when off.
    def initialize(path)
      @path = path
      @mtime = mtime
    end

    def on? = !@path.nil?

    # True once for each new mtime.
    def touched?
      return false unless @path
      return false if (now = mtime) == @mtime

      @mtime = now
      !now.nil?
    end

    private

    def mtime
      File.mtime(@path) if @path
    rescue SystemCallError
      nil
    end
  end
end
