# frozen_string_literal: true

require "json"

module Oribi
  module Bench
    # `--plot FILE.html`: one self-contained page (no network fetches, the
    # drawing code is inline) with latency over time (mean, p50, p99, max
    # per interval, by send time) and the percentile curve of the run.
    module Plot
      module_function

      def data(result, interval, title)
        {
          title: title,
          interval: interval,
          series: (result[:series] || []).each_with_index.map do |s, i|
            { t: (i * interval).round(6), count: s[:count], errors: s[:errors],
              mean: s[:mean]&.round(1), p50: s[:p50], p99: s[:p99], max: s[:max] }
          end,
          percentiles: (result[:percentiles] || []).map { |p, us| [p, us] }
        }
      end

      def html(result, interval:, title: "oribi bench")
        json = JSON.generate(data(result, interval, title)).gsub("</", "<\\/")
        esc = title.gsub("&", "&amp;").gsub("<", "&lt;").gsub(">", "&gt;")
        <<~HTML
          <!DOCTYPE html>
          <html lang="en"><head><meta charset="utf-8"><title>#{esc}</title>
          <style>
          body { font: 14px system-ui, sans-serif; margin: 2em; color: #222; }
          canvas { border: 1px solid #ddd; display: block; margin: 0.5em 0 2em; }
          .key span { margin-right: 1.5em; } .key b { display: inline-block; width: 1em; height: 3px; vertical-align: middle; margin-right: 0.3em; }
          </style></head><body>
          <h1>#{esc}</h1>
          <h2>Latency over time (by send time, log scale)</h2>
          <div class="key" id="key"></div>
          <canvas id="time" width="1000" height="400"></canvas>
          <h2>Latency by percentile</h2>
          <canvas id="pct" width="1000" height="400"></canvas>
          <script>
          const D = #{json};
          #{SCRIPT}
          </script></body></html>
        HTML
      end

      # The drawing helpers, shared with `oribi tune`'s page (tune/plot.rb):
      # value formats, log and linear scales, grid and labels, a polyline.
      HELPERS = <<~JS
        function fmt(us) {
          if (us >= 1e6) return (us / 1e6).toPrecision(3) + "s";
          if (us >= 1e3) return (us / 1e3).toPrecision(3) + "ms";
          return Math.round(us) + "µs";
        }
        function logScale(lo, hi, a, b) {
          lo = Math.max(1, lo); hi = Math.max(lo * 10, hi);
          const l0 = Math.log10(lo), l1 = Math.log10(hi);
          const f = v => b - (Math.log10(Math.max(v, lo)) - l0) / (l1 - l0) * (b - a);
          f.ticks = [];
          for (let e = Math.floor(l0); e <= Math.ceil(l1); e++) if (e >= l0 - 1e-9 && e <= l1 + 1e-9) f.ticks.push(Math.pow(10, e));
          return f;
        }
        function linScale(hi, a, b) {
          hi = hi > 0 ? hi : 1;
          const raw = hi / 5, mag = Math.pow(10, Math.floor(Math.log10(raw))), n = raw / mag;
          const step = (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * mag; // about 5 round ticks
          const top = Math.ceil(hi / step) * step;
          const f = v => b - v / top * (b - a);
          f.ticks = [];
          for (let v = 0; v <= top + 1e-9; v += step) f.ticks.push(v);
          return f;
        }
        function frame(ctx, W, H, m, y, xlabels, label = fmt) {
          ctx.strokeStyle = "#eee"; ctx.fillStyle = "#555"; ctx.font = "12px sans-serif";
          y.ticks.forEach(v => { const py = y(v); ctx.beginPath(); ctx.moveTo(m.l, py); ctx.lineTo(W - m.r, py); ctx.stroke(); ctx.fillText(label(v), 4, py + 4); });
          xlabels.forEach(([px, text]) => { ctx.fillText(text, px - 10, H - 8); });
        }
        function line(ctx, pts, color) {
          ctx.strokeStyle = color; ctx.lineWidth = 1.5; ctx.beginPath();
          let started = false;
          pts.forEach(([x, v]) => { if (v == null) { started = false; return; } if (!started) { ctx.moveTo(x, v); started = true; } else ctx.lineTo(x, v); });
          ctx.stroke();
        }
      JS

      SCRIPT = HELPERS + <<~JS
        const COLORS = { mean: "#888", p50: "#1f77b4", p99: "#d62728", max: "#2ca02c" };
        (function timeChart() {
          const c = document.getElementById("time"), ctx = c.getContext("2d"), W = c.width, H = c.height;
          const m = { l: 60, r: 20, t: 10, b: 30 }, S = D.series;
          if (!S.length) { ctx.fillText("no samples", W / 2, H / 2); return; }
          const vals = S.flatMap(s => [s.p50, s.max]).filter(v => v != null);
          const y = logScale(Math.min(...vals), Math.max(...vals), m.t, H - m.b);
          const x = i => m.l + (i + 0.5) / S.length * (W - m.l - m.r);
          const step = Math.max(1, Math.ceil(S.length / 10));
          frame(ctx, W, H, m, y, S.map((s, i) => [x(i), s.t + "s"]).filter((_, i) => i % step === 0));
          ["mean", "p50", "p99", "max"].forEach(k => line(ctx, S.map((s, i) => [x(i), s[k] == null ? null : y(s[k])]), COLORS[k]));
          ctx.fillStyle = "#d62728";
          S.forEach((s, i) => { if (s.errors) ctx.fillRect(x(i) - 2, H - m.b - 6, 4, 6); });
          document.getElementById("key").innerHTML = Object.entries(COLORS).map(([k, c]) => `<span><b style="background:${c}"></b>${k}</span>`).join("") +
            `<span>interval ${D.interval}s; red ticks: errors</span>`;
        })();
        (function pctChart() {
          const c = document.getElementById("pct"), ctx = c.getContext("2d"), W = c.width, H = c.height;
          const m = { l: 60, r: 20, t: 10, b: 30 }, P = D.percentiles;
          if (!P.length) { ctx.fillText("no samples", W / 2, H / 2); return; }
          const nines = p => Math.min(5, -Math.log10(Math.max(1e-5, 1 - p / 100)));
          const x = p => m.l + nines(p) / 5 * (W - m.l - m.r);
          const y = logScale(Math.min(...P.map(p => p[1])), Math.max(...P.map(p => p[1])), m.t, H - m.b);
          frame(ctx, W, H, m, y, [[x(0), "0%"], [x(90), "90%"], [x(99), "99%"], [x(99.9), "99.9%"], [x(99.99), "99.99%"], [x(99.999), "99.999%"]]);
          line(ctx, P.map(([p, v]) => [x(p), y(v)]), "#1f77b4");
          ctx.fillStyle = "#1f77b4";
          P.forEach(([p, v]) => { ctx.beginPath(); ctx.arc(x(p), y(v), 2.5, 0, 7); ctx.fill(); });
        })();
      JS
    end
  end
end
