# frozen_string_literal: true

module Oribi
  # `oribi --check-config FILE`: reads a config/oribi.rb or a config/puma.rb
  # as the server would, and prints what each word does on Oribi: maps (the
  # Oribi option it sets), differs (set, but not quite as Puma does it),
  # ignored (and why), oribi (an Oribi option), then the values the server
  # would run with. Exit status 0 when the server would start with it, 2
  # when it would not (the error, one line, as at start).
  module CheckConfig
    module_function

    def run(path, out: $stdout)
      report = []
      config = Config.new
      Config.read(config, path, report: report)
      config.check!
      check_binds(config)
      out.puts "#{path}, as Oribi reads it#{' (a Puma config: Puma\'s words and defaults)' if PumaWords.file?(path)}:"
      width = report.map { |_, word, _| word.size }.max.to_i
      report.each do |kind, word, what|
        out.puts format("  %-8s %-#{width}s%s", kind, word, what ? "  #{kind == :maps ? '→ ' : ''}#{what}" : "").rstrip
      end
      out.puts "Oribi would run with:"
      %i[binds workers threads environment preload_app working_directory worker_timeout request_timeout].each do |name|
        out.puts "  #{name} #{Options.show(config[name])}"
      end
      0
    rescue Config::Error, ArgumentError => e
      out.puts "oribi: #{e.message.lines.first.chomp}"
      2
    end

    # A unix socket bound in a directory that does not exist fails only
    # when the server binds it (/run/app/ without systemd's
    # RuntimeDirectory=app, say): said here, where the file is checked. A
    # TLS listener's certificate and key are read as at boot.
    def check_binds(config)
      config[:binds].each do |uri|
        base, params = Listeners.split_params(uri)
        tls = Listeners.tls_settings(base, params, config.tls_pems) and Listeners.tls_context(uri, tls)
        kind, path = Listeners.parse(base)
        dir = File.dirname(path.to_s)
        next unless kind == :unix && !File.directory?(dir)

        raise Config::Error, "bind #{uri}: the directory #{dir} does not exist (under systemd, " \
                             "RuntimeDirectory=#{File.basename(dir)} in the unit makes /run/#{File.basename(dir)})"
      end
    end
  end
end
