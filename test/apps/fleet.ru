# frozen_string_literal: true

# A host of the fleet (test/fleet_test.rb): each request spends a random
# time in the app (exponential, at most 5 times its mean), as on a
# database, using no CPU; the body names the host. The mean is
# FLEET_APP_DELAY seconds, or what the file FLEET_SLOW_FILE holds while it
# exists (a host made slow for a while). The load's schedule is regular;
# the random times make queues form as a real app's do.
delay = Float(ENV.fetch("FLEET_APP_DELAY", "0.01"))
slow = ENV["FLEET_SLOW_FILE"]
name = "#{ENV.fetch('PRIVATE_IP', 'fleet')}\n"
run lambda { |_env|
  mean = slow && File.exist?(slow) ? File.read(slow).to_f : delay
  sleep [-Math.log(1 - rand) * mean, 5 * mean].min
  [200, { "content-type" => "text/plain" }, [name]]
}
