# frozen_string_literal: true

require "digest"

# Uploads and downloads as a Rails app has them: a multipart file field,
# and send_file (which Rack::Sendfile turns into an X-Sendfile header for a
# proxy that serves files, when config.action_dispatch.x_sendfile_header
# says so).
class FilesController < ActionController::Base
  skip_forgery_protection

  def upload
    file = params.require(:file)
    data = file.read
    render plain: "#{file.original_filename} #{data.bytesize} #{Digest::SHA256.hexdigest(data)}"
  end

  def download
    send_file Rails.root.join("tmp", params.require(:name)), type: "application/octet-stream"
  end
end
