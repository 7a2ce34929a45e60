# frozen_string_literal: true

class WriteRowJob < ActiveJob::Base
  def perform(id)
    Row.create!(id: id, pid: Process.pid, release: JOBS_RELEASE)
  end
end
