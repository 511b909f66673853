// The requests page: the signed-in project's single requests, background responses and flex
// calls (GET /v1/queue/requests), newest first, 20 a page (the `after` cursor), with each one's
// lane, status, model, latency (create to end) and tokens; refreshed while any is queued or running.

import { api } from "./api.js";
import { errorBox, h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { statusBadge } from "./stats.js";

const PAGE_SIZE = 20;
const ACTIVE_REFRESH_MS = 1000;
const IDLE_REFRESH_MS = 5000;
const RUNNING = new Set(["queued", "in_progress"]);

export function requestsPage(root, ctx, params) {
  const after = params.get("after");
  const list = h("div", { id: "requests" }, h("p", { class: "muted" }, "Loading…"));
  const pager = h("div", { class: "pager" });
  replace(root, h("h1", {}, "Requests"), list, pager,
    h("p", { class: "muted small" },
      "Background responses (POST /v1/responses with background: true) until they are deleted, and flex calls " +
      "(service_tier: \"flex\") while they run and, once answered, until their tombstones are purged " +
      "(BATCHD_TOMBSTONE_GRACE_SECONDS). Latency: from create to end, in whole seconds."));
  ctx.loop(async () => {
    const query = new URLSearchParams({ limit: PAGE_SIZE });
    if (after) query.set("after", after);
    let page;
    try {
      page = await api(`/queue/requests?${query}`);
    } catch (error) {
      replace(list, errorBox(error));
      return IDLE_REFRESH_MS;
    }
    replace(list, page.data.length ? requestTable(page.data) : h("p", { class: "muted", id: "requests-empty" }, "No background or flex requests yet."));
    replace(
      pager,
      after ? h("a", { href: "#/requests" }, "← Newest") : null,
      page.has_more ? h("a", { id: "next-page", href: `#/requests?after=${encodeURIComponent(page.last_id)}` }, "Older →") : null,
    );
    return page.data.some((r) => RUNNING.has(r.status)) ? ACTIVE_REFRESH_MS : IDLE_REFRESH_MS;
  });
}

function requestTable(requests) {
  const now = Date.now() / 1000;
  return h(
    "table",
    { class: "list" },
    h("thead", {}, h("tr", {}, ["Request", "Lane", "Status", "Model", "Latency", "Tokens"].map((c) => h("th", {}, c)))),
    h(
      "tbody",
      {},
      requests.map((r) =>
        h(
          "tr",
          { dataset: { requestId: r.id, lane: r.lane, status: r.status } },
          h("td", {}, h("span", { class: "mono" }, r.id), h("div", { class: "muted small" }, `${fmt.time(r.created_at)} · ${r.endpoint}`)),
          h("td", {}, h("span", { class: `badge lane-${r.lane}` }, r.lane)),
          h("td", {}, statusBadge(r.status)),
          h("td", {}, r.model ?? "—"),
          h("td", { class: "num", dataset: { field: "latency" } },
            r.seconds === null ? `${fmt.duration(now - r.created_at)} so far` : fmt.duration(r.seconds)),
          h("td", { class: "num", dataset: { field: "tokens" }, title: `${fmt.count(r.usage.input_tokens)} in / ${fmt.count(r.usage.output_tokens)} out` },
            fmt.count(r.usage.total_tokens)),
        ),
      ),
    ),
  );
}
