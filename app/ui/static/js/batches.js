// The batches page: newest first, 20 a page (the `after` cursor), refreshed while any is active.

import { api } from "./api.js";
import { errorBox, h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { currentRate, eta, isActive, progressBar, sample, statusBadge } from "./stats.js";

const PAGE_SIZE = 20;
const ACTIVE_REFRESH_MS = 1000;
const IDLE_REFRESH_MS = 10000;

export function batchesPage(root, ctx, params) {
  const after = params.get("after");
  const table = h("div", { id: "batches" }, h("p", { class: "muted" }, "Loading…"));
  const pager = h("div", { class: "pager" });
  replace(root, h("h1", {}, "Batches"), table, pager);

  ctx.loop(async () => {
    let page;
    try {
      page = await api(`/batches?limit=${PAGE_SIZE}${after ? `&after=${encodeURIComponent(after)}` : ""}`);
    } catch (error) {
      replace(table, errorBox(error));
      return IDLE_REFRESH_MS;
    }
    page.data.forEach(sample);
    replace(table, page.data.length ? batchTable(page.data) : h("p", { class: "muted" }, "No batches yet."));
    replace(
      pager,
      after ? h("a", { href: "#/batches" }, "← Newest") : null,
      page.has_more ? h("a", { id: "next-page", href: `#/batches?after=${encodeURIComponent(page.last_id)}` }, "Older →") : null,
    );
    return page.data.some(isActive) ? ACTIVE_REFRESH_MS : IDLE_REFRESH_MS;
  });
}

function batchTable(batches) {
  return h(
    "table",
    { class: "list" },
    h("thead", {}, h("tr", {}, ["Batch", "Status", "Progress", "Lines/s", "Tokens", "ETA"].map((c) => h("th", {}, c)))),
    h("tbody", {}, batches.map(batchRow)),
  );
}

function batchRow(batch) {
  const { total, completed, failed } = batch.request_counts;
  return h(
    "tr",
    { dataset: { batchId: batch.id, status: batch.status } },
    h(
      "td",
      {},
      h("a", { href: `#/batch/${encodeURIComponent(batch.id)}` }, batch.id),
      h("div", { class: "muted small" }, `${fmt.time(batch.created_at)} · ${fmt.api(batch)} · ${batch.endpoint}${batch.model ? ` · ${batch.model}` : ""}`),
    ),
    h("td", {}, statusBadge(batch.status)),
    h(
      "td",
      { class: "progress-cell" },
      progressBar(batch),
      h("div", { class: "muted small" }, `${fmt.count(completed)} ok · ${fmt.count(failed)} failed · ${fmt.count(total)} total`),
    ),
    h("td", { class: "num" }, fmt.rate(currentRate(batch))),
    h("td", { class: "num", title: `${fmt.count(batch.usage.input_tokens)} in / ${fmt.count(batch.usage.output_tokens)} out` },
      fmt.count(batch.usage.total_tokens)),
    h("td", { class: "num" }, isActive(batch) ? fmt.duration(eta(batch)) : "—"),
  );
}
