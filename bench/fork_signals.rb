# frozen_string_literal: true

# Does a signal sent to a process while it forks reach the child too? The
# Ruby behaviour behind Signals.quiet (lib/oribi/signals.rb): the parent
# traps TERM and forks children that reset TERM to its default, while
# another process sends the parent TERM in a loop; a child that raises
# SignalException saw a TERM meant for its parent. Run it with each Ruby:
#
#   ruby bench/fork_signals.rb [CHILDREN (200)]
#   .ci/rubies test 3.4 ruby bench/fork_signals.rb
$stdout.sync = true
children = Integer(ARGV.fetch(0, 200))
handled = 0
trap("TERM") { handled += 1 }
sender = Process.spawn("sh", "-c", "while kill -TERM #{Process.pid} 2>/dev/null; do :; done")
saw = children.times.count do
  pid = fork do
    trap("TERM", "DEFAULT")
    begin
      100.times { [1, 2, 3].map { |x| x * 2 } } # Ruby work: pending signals are handled here
      exit!(0)
    rescue SignalException
      exit!(3)
    end
  end
  _, status = Process.wait2(pid)
  status.exitstatus == 3 || status.signaled?
end
Process.kill(:KILL, sender)
Process.wait(sender)
puts "#{RUBY_DESCRIPTION}: #{saw} of #{children} children saw a TERM sent to their parent " \
     "(the parent handled #{handled})"
