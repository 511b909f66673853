// A small hand-written SVG line chart (no library: the dashboard ships no third-party code).

import { s } from "./dom.js";
import { count as fmtCount, rate as fmtRate, time as fmtTime } from "./format.js";

const W = 640;
const H = 180;
const PAD = { left: 48, right: 12, top: 12, bottom: 28 };

/** Lines/s over time from `points` [{t, rate}]; `note` goes under the plot. */
export function throughputChart(points, note) {
  const svg = s("svg", {
    class: "chart",
    viewBox: `0 0 ${W} ${H}`,
    role: "img",
    "aria-label": "Throughput in lines per second over time",
  });
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  svg.append(s("rect", { class: "chart-frame", x: PAD.left, y: PAD.top, width: plotW, height: plotH }));
  if (points.length < 2) {
    svg.append(s("text", { class: "chart-empty", x: W / 2, y: H / 2, "text-anchor": "middle" },
      "no lines have run"));
    return svg;
  }
  const t0 = points[0].t;
  const t1 = Math.max(points[points.length - 1].t, t0 + 1);
  const { x, y } = scales(svg, t0, t1, Math.max(...points.map((p) => p.rate)), fmtRate);
  const coords = points.map((p) => `${x(p.t).toFixed(1)},${y(p.rate).toFixed(1)}`);
  const base = PAD.top + plotH;
  svg.append(
    s("polygon", { class: "chart-area", points: `${PAD.left},${base} ${coords.join(" ")} ${x(t1).toFixed(1)},${base}` }),
    s("polyline", { class: "chart-line", points: coords.join(" ") }),
    s("text", { class: "chart-label", x: PAD.left, y: H - 8 }, fmtTime(t0).slice(11)),
    s("text", { class: "chart-label", x: PAD.left + plotW, y: H - 8, "text-anchor": "end" }, fmtTime(t1).slice(11)),
    s("text", { class: "chart-label", x: PAD.left + plotW / 2, y: H - 8, "text-anchor": "middle" }, note || "lines/s"),
  );
  return svg;
}

/** The x (time) and y (value, from 0 to a round maximum) scales of the plot, with the value
 *  grid lines and their labels (`fmt`) drawn on `svg`. */
function scales(svg, t0, t1, maxValue, fmt) {
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const top = niceMax(maxValue);
  const x = (t) => PAD.left + ((t - t0) / (t1 - t0)) * plotW;
  const y = (v) => PAD.top + plotH - (v / top) * plotH;
  for (const fraction of [0, 0.5, 1]) {
    const v = top * fraction;
    svg.append(
      s("line", { class: "chart-grid", x1: PAD.left, x2: PAD.left + plotW, y1: y(v), y2: y(v) }),
      s("text", { class: "chart-label", x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end" }, fmt(v)),
    );
  }
  return { x, y };
}

function niceMax(value) {
  if (!(value > 0)) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (value <= step * magnitude) return step * magnitude;
  }
  return 10 * magnitude;
}

const SERIES_CLASSES = 6; // colours in app.css: .chart-series-0 .. -5

/** Several named lines over the same times: `series` [{name, points: [{t, value}]}], with a
 *  legend; each line carries data-series (its name) for tests and styling. */
export function seriesChart(series, note) {
  const svg = s("svg", { class: "chart", id: "usage-chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": note });
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  svg.append(s("rect", { class: "chart-frame", x: PAD.left, y: PAD.top, width: plotW, height: plotH }));
  const points = series.flatMap((line) => line.points);
  if (!points.length) {
    svg.append(s("text", { class: "chart-empty", x: W / 2, y: H / 2, "text-anchor": "middle" }, "no usage in this range"));
    return svg;
  }
  const t0 = Math.min(...points.map((p) => p.t));
  const t1 = Math.max(Math.max(...points.map((p) => p.t)), t0 + 1);
  const { x, y } = scales(svg, t0, t1, Math.max(...points.map((p) => p.value)), fmtCount);
  series.forEach((line, i) => {
    const coords = line.points.map((p) => `${x(p.t).toFixed(1)},${y(p.value).toFixed(1)}`).join(" ");
    svg.append(s("polyline", { class: `chart-series chart-series-${i % SERIES_CLASSES}`, points: coords, "data-series": line.name }));
  });
  svg.append(
    s("text", { class: "chart-label", x: PAD.left, y: H - 8 }, fmtTime(t0).slice(5, 16)),
    s("text", { class: "chart-label", x: PAD.left + plotW, y: H - 8, "text-anchor": "end" }, fmtTime(t1).slice(5, 16)),
    s("text", { class: "chart-label", x: PAD.left + plotW / 2, y: H - 8, "text-anchor": "middle" }, note),
  );
  const legend = series.map((line, i) =>
    s("text", { class: `chart-legend chart-series-${i % SERIES_CLASSES}`, x: PAD.left + 8, y: PAD.top + 14 + 14 * i }, line.name));
  svg.append(...legend);
  return svg;
}
