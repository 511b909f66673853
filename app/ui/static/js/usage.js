// The usage page (admin keys): tokens per project over time from the Usage API, and the
// totals of the range per project and model, for chargeback.

import { api } from "./api.js";
import { errorBox, h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { seriesChart } from "./chart.js";

const REFRESH_MS = 10000;
// Range -> the bucket width and how many buckets cover it (the Usage API's limits).
const RANGES = {
  hour: { label: "Last hour", width: "1m", seconds: 60, buckets: 60 },
  day: { label: "Last 24 hours", width: "1h", seconds: 3600, buckets: 24 },
  week: { label: "Last 7 days", width: "1d", seconds: 86400, buckets: 7 },
};

export function usagePage(root, ctx, params) {
  const range = RANGES[params.get("range")] ? params.get("range") : "day";
  const select = h(
    "select",
    { id: "usage-range" },
    Object.entries(RANGES).map(([key, r]) => h("option", { value: key, selected: key === range }, r.label)),
  );
  select.addEventListener("change", () => {
    location.hash = `#/usage?range=${select.value}`;
  });
  const body = h("div", { id: "usage" }, h("p", { class: "muted" }, "Loading…"));
  replace(
    root,
    h("div", { class: "title-row" }, h("h1", {}, "Usage"), select),
    body,
    h("p", { class: "muted small" }, "Tokens of the lines batchd ran (successful lines, as in the output files), from GET /v1/organization/usage. Admin keys only."),
  );
  ctx.loop(async () => {
    const r = RANGES[range];
    const now = Math.floor(Date.now() / 1000);
    const start = Math.floor(now / r.seconds) * r.seconds - (r.buckets - 1) * r.seconds;
    const query = (kind, groups) =>
      api(`/organization/usage/${kind}?start_time=${start}&bucket_width=${r.width}&limit=${r.buckets}` +
        groups.map((g) => `&group_by=${g}`).join(""));
    try {
      const [completions, embeddings] = await Promise.all([
        query("completions", ["project_id", "model"]),
        query("embeddings", ["project_id", "model"]),
      ]);
      replace(body, chartOf([completions, embeddings]), tableOf([completions, embeddings]));
    } catch (error) {
      replace(body, error.status === 403
        ? h("p", { class: "error", id: "usage-forbidden" }, "Usage is shown to admin keys only (batchd keys create --admin).")
        : errorBox(error));
    }
    return REFRESH_MS;
  });
}

const tokens = (result) => result.input_tokens + (result.output_tokens || 0);

/** One line per project: its tokens (input + output, all models) in each bucket. */
function chartOf(pages) {
  const starts = pages[0].data.map((bucket) => bucket.start_time);
  const byProject = new Map();
  pages.forEach((page) => page.data.forEach((bucket, i) => {
    for (const result of bucket.results) {
      if (!byProject.has(result.project_id)) byProject.set(result.project_id, starts.map(() => 0));
      byProject.get(result.project_id)[i] += tokens(result);
    }
  }));
  const series = [...byProject.entries()].sort().map(([name, values]) => ({
    name,
    points: values.map((value, i) => ({ t: starts[i], value })),
  }));
  return seriesChart(series, "tokens per bucket, by project");
}

/** The range's totals per project and model. */
function tableOf(pages) {
  const rows = new Map();
  for (const page of pages) {
    for (const bucket of page.data) {
      for (const r of bucket.results) {
        const key = `${r.project_id}\u0000${r.model}`;
        const row = rows.get(key) || { project: r.project_id, model: r.model, requests: 0, input: 0, cached: 0, output: 0 };
        row.requests += r.num_model_requests;
        row.input += r.input_tokens;
        row.cached += r.input_cached_tokens || 0;
        row.output += r.output_tokens || 0;
        rows.set(key, row);
      }
    }
  }
  if (!rows.size) return h("p", { class: "muted", id: "usage-empty" }, "No lines finished in this range.");
  const sorted = [...rows.values()].sort((a, b) => a.project.localeCompare(b.project) || a.model.localeCompare(b.model));
  return h(
    "table",
    { class: "list", id: "usage-table" },
    h("thead", {}, h("tr", {}, ["Project", "Model", "Requests", "Input tokens", "Cached input", "Output tokens"].map((c) => h("th", {}, c)))),
    h("tbody", {}, sorted.map((row) =>
      h(
        "tr",
        { dataset: { project: row.project, model: row.model, requests: row.requests, input: row.input, output: row.output } },
        h("td", {}, row.project),
        h("td", { class: "mono" }, row.model),
        h("td", { class: "num" }, fmt.count(row.requests)),
        h("td", { class: "num" }, fmt.count(row.input)),
        h("td", { class: "num" }, fmt.count(row.cached)),
        h("td", { class: "num" }, fmt.count(row.output)),
      ))),
  );
}
