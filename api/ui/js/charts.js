// Time-series charts with the vendored uPlot (api/ui/vendor): one per metric group on the overview.
import { h } from "./dom.js";

// Three significant digits, so that 0.004 MiB/s does not read as 0.
function short(v) {
  return v === 0 ? "0" : `${+v.toPrecision(3)}`;
}

const COLORS = ["#2563eb", "#16a34a", "#dc2626", "#9333ea"];

// series: [{label, values}] aligned with `times` (ms). Returns the chart's element.
export function lineChart(title, times, series, { unit = "", width = 440 } = {}) {
  const box = h("div", { class: "chart", "data-chart": title }, h("h3", {}, title));
  const data = [times.map((t) => t / 1000), ...series.map((s) => s.values)];
  const opts = {
    width, height: 200,
    scales: { x: { time: true } },
    axes: [{}, { values: (_, ticks) => ticks.map((v) => `${short(v)}${unit}`), size: 60 }],
    series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: COLORS[i % COLORS.length], width: 1.5,
      spanGaps: false, value: (_, v) => (v === null || v === undefined ? "–" : `${+v.toFixed(3)}${unit}`) }))],
    legend: { live: true },
  };
  if (typeof window.uPlot === "function") new window.uPlot(opts, data, box);
  else box.append(h("p", { class: "muted" }, "charting library missing"));
  return box;
}
