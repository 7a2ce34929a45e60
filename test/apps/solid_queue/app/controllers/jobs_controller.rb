# frozen_string_literal: true

class JobsController < ActionController::Base
  def create
    WriteRowJob.perform_later(Integer(params[:id], 10))
    render plain: "queued #{params[:id]}"
  end
end
