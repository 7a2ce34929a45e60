# frozen_string_literal: true

class HelloController < ActionController::Base
  def show
    render plain: "Rails #{Rails.version} on Oribi: multiprocess=#{request.env['rack.multiprocess']}"
  end

  # Form parameters come from rack.input as Oribi filled it.
  def echo
    render plain: params[:msg]
  end
end
