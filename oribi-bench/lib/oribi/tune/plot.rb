# frozen_string_literal: true

require "json"
require "oribi/report/chart_library"
require "oribi/tune/report"

module Oribi
  module Tune
    # The HTML report: one self-contained page (uPlot inline, no network)
    # with the text report, then four charts against threads per worker,
    # one line per worker count: the highest rate within the SLO with its
    # 95% interval as error bars, the p99 at that rate (and the SLO), the
    # server's CPU at that rate (and the machine's CPUs), and the RSS per
    # worker and in total (and --memory-limit). When every chart has drawn,
    # the script sets data-charts-drawn on <body> (what a test waits for).
    module Plot
      module_function

      CHARTS = { "rate" => "Highest rate within the SLO, with its 95% interval",
                 "p99" => "p99 latency at that rate (log scale when it spans a decade)",
                 "cpu" => "Server CPU at that rate (100% = one core)",
                 "rss" => "Memory: RSS per worker (solid) and in total (dashed)" }.freeze

      def html(run, title: "oribi tune")
        doc = Report.document(run).merge(slo_p99_ms: run[:slo].limits[:p99]&.*(1000))
        json = JSON.generate(doc).gsub("</", "<\\/")
        esc = ->(s) { s.gsub("&", "&amp;").gsub("<", "&lt;").gsub(">", "&gt;") }
        charts = CHARTS.map { |id, heading| %(<h2>#{esc.(heading)}</h2>\n<div class="chart" id="#{id}"></div>) }
        <<~HTML
          <!DOCTYPE html>
          <html lang="en"><head><meta charset="utf-8"><title>#{esc.(title)}</title>
          #{Oribi::Report::ChartLibrary.head}
          <style>
          body { font: 14px system-ui, sans-serif; margin: 2em; color: #222; }
          pre { background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: 11px; white-space: pre-wrap; }
          .chart { margin: 0.5em 0 2em; } .empty { color: #888; font-style: italic; }
          </style></head><body>
          <h1>#{esc.(title)}</h1>
          <pre>#{esc.(Report.text(run))}</pre>
          #{charts.join("\n")}
          <script>
          const D = #{json};
          #{SCRIPT}
          </script></body></html>
        HTML
      end

      SCRIPT = <<~JS
        const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
        const S = D.settings.filter(s => s.workers != null);
        const THREADS = [...new Set(S.map(s => s.threads))].sort((a, b) => a - b);
        const WORKERS = [...new Set(S.map(s => s.workers))].sort((a, b) => a - b);
        const MIB = 1048576;
        const at = (w, t) => S.find(s => s.workers === w && s.threads === t);
        const fmt = v => v == null ? "-" : v === 0 ? "0" : v >= 10 ? Math.round(v).toString() : v.toPrecision(2);
        const AXIS = { font: "13px system-ui, sans-serif", labelFont: "bold 13px system-ui, sans-serif", size: 72, labelSize: 22 };
        let pending = 0;
        function drawn() { if (--pending === 0) document.body.setAttribute("data-charts-drawn", "yes"); }
        function empty(id, why) {
          const el = document.getElementById(id);
          el.className += " empty"; el.textContent = why;
        }
        // Vertical bars from lo to hi at each point, capped, in the series' colour.
        function errorBars(bounds) {
          return u => {
            const ctx = u.ctx, cap = 5 * devicePixelRatio;
            ctx.save(); ctx.lineWidth = 1.5 * devicePixelRatio;
            bounds.forEach((b, k) => {
              if (!u.series[k + 1].show) return;
              ctx.strokeStyle = PALETTE[k % PALETTE.length];
              u.data[0].forEach((x, i) => {
                if (b[i] == null) return;
                const px = u.valToPos(x, "x", true), y1 = u.valToPos(b[i][0], "y", true), y2 = u.valToPos(b[i][1], "y", true);
                ctx.beginPath();
                ctx.moveTo(px, y1); ctx.lineTo(px, y2);
                ctx.moveTo(px - cap, y1); ctx.lineTo(px + cap, y1);
                ctx.moveTo(px - cap, y2); ctx.lineTo(px + cap, y2);
                ctx.stroke();
              });
            });
            ctx.restore();
          };
        }
        // A horizontal dashed line at y, labelled.
        function rule(y, label) {
          return u => {
            if (y == null) return;
            const ctx = u.ctx, py = u.valToPos(y, "y", true);
            if (py < u.bbox.top || py > u.bbox.top + u.bbox.height) return;
            ctx.save(); ctx.strokeStyle = "#888"; ctx.setLineDash([6, 4]); ctx.lineWidth = devicePixelRatio;
            ctx.beginPath(); ctx.moveTo(u.bbox.left, py); ctx.lineTo(u.bbox.left + u.bbox.width, py); ctx.stroke();
            ctx.fillStyle = "#555"; ctx.font = 12 * devicePixelRatio + "px system-ui, sans-serif"; ctx.textAlign = "right";
            ctx.fillText(label, u.bbox.left + u.bbox.width - 6 * devicePixelRatio, py - 4 * devicePixelRatio);
            ctx.restore();
          };
        }
        // One chart against threads: a line per worker count (and extra
        // series, e.g. dashed totals), y from value(setting).
        function chart(id, opts) {
          const series = [{ label: "threads" }], data = [THREADS];
          const lines = opts.lines || WORKERS.map((w, k) => ({ w: w, k: k, value: opts.value, label: w + (w === 1 ? " worker" : " workers") }));
          lines.forEach(l => {
            const ys = THREADS.map(t => { const s = at(l.w, t); return s ? l.value(s) : null; });
            data.push(ys);
            series.push({ label: l.label, stroke: PALETTE[l.k % PALETTE.length], width: 2, dash: l.dash, spanGaps: false,
                          points: { show: true, size: 7 }, value: (u, v) => v == null ? "-" : fmt(v) + opts.unit });
          });
          if (!data.slice(1).some(ys => ys.some(v => v != null))) return empty(id, opts.none);
          const ys = data.slice(1).flat().filter(v => v != null).concat(opts.extra || []);
          const hooks = { draw: [...(opts.draw || []), drawn] };
          const log2 = THREADS.length > 1;
          // log y only when the values span a decade: else its ticks fall on odd values
          const logY = opts.log && Math.max(...ys) > 10 * Math.min(...ys);
          pending++;
          new uPlot({
            width: 900, height: 320, legend: { live: false },
            scales: { x: { time: false, distr: log2 ? 3 : 1, log: 2, range: (u, a, b) => log2 ? [a / 1.4, b * 1.4] : [a - 1, b + 1] },
                      y: logY ? { distr: 3, range: (u, a, b) => [Math.min(...ys) / 1.5, Math.max(...ys) * 1.5] }
                                  : { range: (u, a, b) => [0, Math.max(...ys) * 1.1] } },
            axes: [
              { ...AXIS, size: 40, label: "threads per worker", values: (u, splits) => splits.map(v => THREADS.includes(v) ? String(v) : ""), splits: () => THREADS },
              { ...AXIS, label: opts.label, values: (u, splits) => splits.map(v => v == null ? "" : fmt(v) + opts.unit) },
            ],
            series: series, hooks: hooks,
          }, data, document.getElementById(id));
        }
        if (!S.length) {
          ["rate", "p99", "cpu", "rss"].forEach(id => empty(id, "no settings started by tune (a running server: see the table)"));
          document.body.setAttribute("data-charts-drawn", "yes");
        } else {
          chart("rate", { label: "requests per second", unit: "/s", value: s => s.max_rate, none: "no setting met the SLO",
                          extra: S.map(s => s.rate_interval ? s.rate_interval[1] : null).filter(v => v != null),
                          draw: [errorBars(WORKERS.map(w => THREADS.map(t => { const s = at(w, t); return s && s.max_rate != null && s.rate_interval; })))] });
          chart("p99", { label: "p99 latency", unit: "ms", log: true, value: s => s.max_rate == null ? null : s.latency_ms.p99,
                         none: "no setting met the SLO", extra: D.slo_p99_ms ? [D.slo_p99_ms] : [], draw: [rule(D.slo_p99_ms, "SLO p99 " + D.slo_p99_ms + "ms")] });
          chart("cpu", { label: "server CPU", unit: "%", value: s => s.max_rate == null ? null : s.cpu_percent, none: "no CPU measured",
                         extra: D.cpus ? [D.cpus * 100] : [], draw: [rule(D.cpus && D.cpus * 100, D.cpus + " CPUs: " + D.cpus * 100 + "%")] });
          const rss = WORKERS.flatMap((w, k) => [
            { w: w, k: k, value: s => s.memory_bytes && s.memory_bytes.worker_rss / MIB, label: w + (w === 1 ? " worker" : " workers") + ": per worker" },
            { w: w, k: k, dash: [6, 4], value: s => s.memory_bytes && s.memory_bytes.total_rss / MIB, label: "total" }]);
          chart("rss", { label: "RSS", unit: "MiB", lines: rss, none: "no memory measured",
                         extra: D.memory_limit_bytes ? [D.memory_limit_bytes / MIB] : [],
                         draw: [rule(D.memory_limit_bytes && D.memory_limit_bytes / MIB, "--memory-limit")] });
        }
      JS
    end
  end
end
