# frozen_string_literal: true

class HelloController < ActionController::Base
  def show
    render plain: "Rails #{Rails.version} on Oribi: multiprocess=#{request.env['rack.multiprocess']}"
  end

  # A typical action for `oribi tune`: waits 100 ms on an upstream call
  # (sleep stands in for the database), then renders for 5 ms of CPU.
  def upstream
    sleep 0.1
    deadline = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) + 0.005
    n = 0
    n += 1 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) < deadline
    render plain: "upstream #{n}"
  end

  # A request that takes ?s= seconds: in flight when a stop begins.
  def nap
    sleep Float(params.fetch(:s, "0"))
    render plain: "napped #{params[:s]} pid #{Process.pid}"
  end

  # Form parameters come from rack.input as Oribi filled it.
  def echo
    render plain: params[:msg]
  end

  # An error the app does not rescue: Rails logs it (FATAL, backtrace), 500.
  def boom
    raise "boom in the app"
  end

  # The code version the server booted with.
  def version
    render plain: "#{BOOT_VERSION} #{Process.ppid}"
  end
end
