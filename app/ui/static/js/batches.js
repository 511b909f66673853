// The batches page: newest first, 20 a page (the `after` cursor), filtered as the form says,
// refreshed while any is active. An admin key sees every project's batches, with a project
// filter (scope.js).

import { api } from "./api.js";
import { anyFilter, apiQuery, filterForm, filterQuery, filtersFrom, suggestModels } from "./batch-filters.js";
import { errorBox, h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { projectFilter, projectQuery, scopedList, showProjects } from "./scope.js";
import { currentRate, eta, isActive, progressBar, sample, statusBadge } from "./stats.js";

const PAGE_SIZE = 20;
const ACTIVE_REFRESH_MS = 1000;
const IDLE_REFRESH_MS = 10000;

export function batchesPage(root, ctx, params) {
  const after = params.get("after");
  const project = params.get("project") || "";
  const filters = filtersFrom(params);
  const form = filterForm(filters, project);
  const table = h("div", { id: "batches" }, h("p", { class: "muted" }, "Loading…"));
  const pager = h("div", { class: "pager" });
  const filter = projectFilter(project, (p) => (location.hash = `#/batches${filterQuery(filters, null, p)}`));
  const create = h("a", { id: "new-batch", class: "button", href: "#/new-batch" }, "New batch");
  replace(root, h("div", { class: "title-row" }, h("h1", {}, "Batches"), create, h("span", { class: "spacer" }), filter), form, table, pager);
  // The model filter suggests the served models (a suggestion only: any model can be typed).
  api("/models")
    .then((models) => suggestModels(form, models.data.map((m) => m.id)))
    .catch(() => {}); // no suggestions then

  ctx.loop(async () => {
    let page, admin;
    const query = new URLSearchParams(apiQuery(filters));
    query.set("limit", PAGE_SIZE);
    if (after) query.set("after", after);
    try {
      ({ page, admin } = await scopedList("batches", query, project));
    } catch (error) {
      replace(table, errorBox(error));
      return IDLE_REFRESH_MS;
    }
    if (admin) showProjects(filter);
    page.data.forEach(sample);
    const none = anyFilter(filters) ? "No batches match these filters." : "No batches yet.";
    replace(table, page.data.length ? batchTable(page.data, admin) : h("p", { class: "muted" }, none));
    replace(
      pager,
      after ? h("a", { href: `#/batches${filterQuery(filters, null, project)}` }, "← Newest") : null,
      page.has_more ? h("a", { id: "next-page", href: `#/batches${filterQuery(filters, page.last_id, project)}` }, "Older →") : null,
    );
    return page.data.some(isActive) ? ACTIVE_REFRESH_MS : IDLE_REFRESH_MS;
  });
}

function batchTable(batches, admin) {
  const columns = ["Batch", ...(admin ? ["Project"] : []), "Status", "Progress", "Lines/s", "Tokens", "ETA"];
  return h(
    "table",
    { class: "list" },
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c)))),
    h("tbody", {}, batches.map((batch) => batchRow(batch, admin))),
  );
}

function batchRow(batch, admin) {
  const { total, completed, failed } = batch.request_counts;
  const link = `#/batch/${encodeURIComponent(batch.id)}${admin ? projectQuery(batch.project) : ""}`;
  return h(
    "tr",
    { dataset: { batchId: batch.id, status: batch.status } },
    h(
      "td",
      {},
      h("a", { href: link }, batch.id),
      h("div", { class: "muted small" }, `${fmt.time(batch.created_at)} · ${fmt.api(batch)} · ${batch.endpoint}${batch.model ? ` · ${batch.model}` : ""}`),
    ),
    admin ? h("td", { class: "project" }, batch.project) : null,
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
