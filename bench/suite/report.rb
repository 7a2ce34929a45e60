# frozen_string_literal: true

module Bench
  module Suite
    # The suite's results as markdown tables (value and ratio to Oribi in
    # the same run, the median of the repeated runs) and an SVG bar chart.
    module Report
      module_function

      def median(values)
        v = values.compact.sort
        return nil if v.empty?

        v.size.odd? ? v[v.size / 2] : (v[v.size / 2 - 1] + v[v.size / 2]) / 2.0
      end

      # { rate:, p50:, p99:, errors:, rss:, cpu_us: } over a cell's runs
      # (errors summed: a failed request is never noise).
      def stat(cell)
        return nil if cell.nil? || cell.runs.empty?

        %i[rate p50 p99 rss cpu_us].to_h { |k| [k, median(cell.runs.map { |r| r[k] })] }
                                   .merge(errors: cell.runs.sum { |r| r[:errors] })
      end

      def find(cells, server, key)
        cells.find { |c| c.server == server && c.key == key }
      end

      def ratio(a, b)
        a && b && b.positive? ? a.to_f / b : nil
      end

      def x(r) = r ? format("%.2f×", r) : "-"
      def ms(us) = us ? format("%.2f", us / 1000.0) : "-"
      def mib(b) = b ? format("%.1f", b / 1048576.0) : "-"
      def int(n) = n.to_i.to_s.reverse.scan(/\d{1,3}/).join(",").reverse

      # One table per workload; rows by transport, mode, then server.
      def tables(cells, servers, workloads)
        workloads.map do |w|
          rows = cells.select { |c| c.workload == w.name }
          next if rows.empty?

          lines = ["### #{w.name}: #{w.about} (#{w.method} #{w.path})", "",
                   "| transport | mode | server | req/s | × oribi | p50 ms | p99 ms | × oribi p99 | errors | RSS/worker MiB | CPU µs/req |",
                   "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
          keys = rows.map(&:key).uniq
          keys.each do |key|
            base = stat(find(rows, "oribi", key))
            servers.each do |s|
              c = find(rows, s, key)
              next unless c

              next if c.skip # listed once, under the tables

              transport = c.via_tcp ? "#{key[1]} (TCP†)" : key[1]
              st = stat(c)
              if st.nil?
                lines << "| #{transport} | #{key[2]} | #{s} | not run | | | | | | | |"
                next
              end
              lines << "| #{transport} | #{key[2]} | #{s == 'oribi' ? '**oribi**' : s} | #{int(st[:rate])} | " \
                       "#{x(ratio(st[:rate], base&.dig(:rate)))} | #{ms(st[:p50])} | #{ms(st[:p99])} | " \
                       "#{x(ratio(st[:p99], base&.dig(:p99)))} | #{st[:errors]} | #{mib(st[:rss])} | " \
                       "#{st[:cpu_us] ? format('%.0f', st[:cpu_us]) : '-'} |"
            end
          end
          lines.join("\n")
        end.compact.join("\n\n")
      end

      # Why some cells were not run, once per reason.
      def skipped(cells)
        cells.select(&:skip).group_by(&:skip).map do |why, cs|
          what = cs.map { |c| "#{c.transport} #{c.mode}#{c.server == 'nginx' ? ' (nginx)' : ''}" }.uniq.join(", ")
          "- #{what}: #{why}"
        end.join("\n")
      end

      # The issue's goals, each with where it stands in this run.
      def goals(cells)
        rate = ->(server, key) { stat(find(cells, server, key))&.dig(:rate) }
        rss = ->(server, key) { stat(find(cells, server, key))&.dig(:rss) }
        o = ->(key) { rate.call("oribi", key) }
        check = lambda do |name, have, want, cmp = :>=|
          if have.nil?
            "| #{name} | not measured | #{want} | - |"
          else
            "| #{name} | #{format('%.2f', have)} | #{cmp} #{want} | #{have.public_send(cmp, want) ? 'met' : '**not met**'} |"
          end
        end
        close = ["hello", "unix", "close"]
        ka = ["hello", "unix", "keep-alive"]
        sin = ["sinatra", "unix", "close"]
        sin_ka = ["sinatra", "unix", "keep-alive"]
        rows = [
          check.call("unix, connection per request: oribi / minimal C", ratio(o.call(close), rate.call("minimal", close)), 0.9),
          check.call("unix, connection per request: oribi / unicorn", ratio(o.call(close), rate.call("unicorn", close)), 1.6),
          check.call("unix, keep-alive: oribi / nginx return 200", ratio(o.call(ka), rate.call("nginx", ka)), 0.5),
          check.call("unix, keep-alive: oribi / iodine", ratio(o.call(ka), rate.call("iodine", ka)), 1.0, :>),
          check.call("unix, keep-alive: oribi / agoo", ratio(o.call(ka), rate.call("agoo", ka)), 1.0, :>),
          check.call("sinatra, unix, connection per request: oribi / unicorn", ratio(o.call(sin), rate.call("unicorn", sin)), 1.2),
          check.call("sinatra, unix, keep-alive: oribi / unicorn", ratio(o.call(sin_ka), rate.call("unicorn", sin_ka)), 1.2)
        ]
        ro = rss.call("oribi", ka)
        ru = rss.call("unicorn", ka)
        rows << check.call("RSS per worker (hello, unix, keep-alive): oribi − unicorn, MiB",
                           ro && ru ? (ro - ru) / 1048576.0 : nil, 2.0, :<=)
        (["| goal | this run | wanted | |", "|---|---:|---|---|"] + rows).join("\n")
      end

      COLORS = { "oribi" => "#d62728", "minimal" => "#7f7f7f", "nginx" => "#bcbd22" }.freeze
      PALETTE = %w[#1f77b4 #ff7f0e #2ca02c #9467bd #8c564b #e377c2 #17becf #aec7e8].freeze

      def esc(s) = s.to_s.gsub("&", "&amp;").gsub("<", "&lt;").gsub(">", "&gt;")

      # Requests/s per server, one panel per (workload, transport, mode):
      # panels in rows by workload; bar lengths scaled within each panel.
      def svg(cells, servers, workloads)
        colors = {}
        servers.each_with_index { |s, i| colors[s] = COLORS[s] || PALETTE[i % PALETTE.size] }
        keys = cells.reject(&:skip).map(&:key).uniq
        wls = workloads.map(&:name).select { |w| keys.any? { |k| k[0] == w } }
        cols = keys.map { |k| k[1..] }.uniq
        pw = 250
        bar = 13
        ph = servers.size * bar + 34
        width = cols.size * pw + 20
        height = wls.size * ph + 40
        out = [%(<svg xmlns="http://www.w3.org/2000/svg" width="#{width}" height="#{height}" font-family="sans-serif" font-size="10">),
               %(<rect width="100%" height="100%" fill="white"/>),
               %(<text x="10" y="16" font-size="13" font-weight="bold">requests/s (median of runs; bars scaled per panel; red: oribi)</text>)]
        wls.each_with_index do |w, row|
          cols.each_with_index do |(t, m), col|
            x0 = 10 + col * pw
            y0 = 30 + row * ph
            out << %(<text x="#{x0}" y="#{y0 + 10}" font-weight="bold">#{esc("#{w} · #{t} · #{m}")}</text>)
            stats = servers.to_h { |s| [s, (c = find(cells, s, [w, t, m])) && !c.skip ? stat(c) : nil] }
            max = stats.values.compact.map { |st| st[:rate] }.max
            next unless max&.positive?

            servers.each_with_index do |s, i|
              st = stats[s] or next
              y = y0 + 16 + i * bar
              len = (st[:rate] / max * (pw - 130)).round(1)
              out << %(<text x="#{x0 + 55}" y="#{y + 9}" text-anchor="end">#{esc(s)}</text>)
              out << %(<rect x="#{x0 + 58}" y="#{y}" width="#{len}" height="#{bar - 3}" fill="#{colors[s]}"/>)
              out << %(<text x="#{x0 + 61 + len}" y="#{y + 9}">#{int(st[:rate])}</text>)
            end
          end
        end
        out << "</svg>"
        out.join("\n") + "\n"
      end
    end
  end
end
