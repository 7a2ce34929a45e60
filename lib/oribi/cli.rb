# frozen_string_literal: true

require "optparse"
require "socket"

module Oribi
  # `oribi [options] [RACKUP_FILE]`: turns the command line into a Config
  # (on top of the config file) and runs the server. Its flags and --help
  # come from the Options table; docs/CONFIGURATION.md says more.
  class CLI
    def self.run(argv) = new.run(argv)

    def run(argv)
      config = begin
        Config.load(parse(argv))
      rescue Config::Error => e
        raise unless Reexec.adopting? # a USR2 whose new config is broken: the old workers go on

        return Server.degraded(e).run
      end
      Server.new(config).run
    rescue OptionParser::ParseError, Config::Error, ArgumentError, SystemCallError, SocketError => e
      $stderr.puts "oribi: #{e.message.lines.first.chomp}"
      2
    end

    # Returns the options given on the command line as a Hash.
    def parse(argv)
      v = {}
      parser = OptionParser.new do |o|
        o.banner = "Usage: oribi [options] [RACKUP_FILE (default #{Options::ALL[:rackup].shown})]\n" \
                   "       oribi ctl #{Ctl::COMMANDS.keys.join('|')} (docs/CONTROL.md)\n" \
                   "       oribi bench URL (oribi-bench/docs/BENCH.md)"
        o.separator ""
        Options::ALL.each_value { |opt| on(o, opt, v) if opt.flags }
        o.on("--check-config FILE", "say what each word of FILE (config/oribi.rb or config/puma.rb) does, then exit") do |f|
          exit CheckConfig.run(f)
        end
        o.on("-v", "--version", "print the version") do
          puts "oribi #{VERSION}"
          exit 0
        end
        o.on("-h", "--help", "this help") do
          puts o
          exit 0
        end
      end
      rest = parser.parse(argv)
      raise OptionParser::NeedlessArgument, rest[1..].join(" ") if rest.size > 1

      v[:rackup] = rest.first if rest.first
      v
    end

    private

    def on(parser, opt, values)
      parser.on(*opt.flags, *[opt.type.pattern].compact, opt.help_line) do |x|
        value = opt.type.parse_cli(x)
        values[opt.name] = opt.type.repeat ? values.fetch(opt.name, []) + value : value
      end
    end
  end
end
