// The batch list's filters (batchd's GET /v1/batches extensions): status, creation dates,
// endpoint, model and one metadata pair. They live in the page's hash (#/batches?status=...), so
// a filtered list survives a reload and can be shared; dates are the browser's local days.

import { h, replace } from "./dom.js";

const FIELDS = ["status", "since", "until", "endpoint", "model", "metadata"];
const STATUSES = [
  ["", "any status"],
  ["validating,in_progress,finalizing,cancelling", "active"],
  ["completed,failed,expired,cancelled", "ended"],
  ...["validating", "in_progress", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled"].map((s) => [s, s]),
];
// The OpenAI batch endpoints (app/core/endpoints.py's OPENAI_BATCH_ENDPOINTS).
export const OPENAI_ENDPOINTS = [
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/responses",
  "/v1/embeddings",
  "/v1/score",
  "/v1/rerank",
  "/v1/audio/transcriptions",
  "/v1/audio/translations",
];
const ENDPOINTS = [...OPENAI_ENDPOINTS, "/v1/messages"];

/** The filters the hash holds: {status, since, until, endpoint, model, metadata}, "" when unset. */
export function filtersFrom(params) {
  return Object.fromEntries(FIELDS.map((name) => [name, params.get(name) || ""]));
}

/** The hash query of `filters` (and a page cursor, and an admin's project), for links that keep them. */
export function filterQuery(filters, after, project) {
  const query = new URLSearchParams();
  for (const name of FIELDS) if (filters[name]) query.set(name, filters[name]);
  if (after) query.set("after", after);
  if (project) query.set("project", project);
  const text = query.toString();
  return text ? `?${text}` : "";
}

const startOfDay = (day) => Math.floor(new Date(`${day}T00:00:00`).getTime() / 1000);

/** The API query for `filters`: both days are included, so "until" ends where the next day starts. */
export function apiQuery(filters) {
  const query = new URLSearchParams();
  if (filters.status) query.set("status", filters.status);
  if (filters.since) query.set("created_after", startOfDay(filters.since));
  if (filters.until) query.set("created_before", startOfDay(filters.until) + 86400);
  if (filters.endpoint) query.set("endpoint", filters.endpoint);
  if (filters.model) query.set("model", filters.model);
  const pair = filters.metadata.match(/^([^=]+)=(.*)$/);
  if (pair) query.set(`metadata[${pair[1].trim()}]`, pair[2].trim());
  return query.toString();
}

export const anyFilter = (filters) => FIELDS.some((name) => filters[name]);

/** The filter form; applying it (or clearing it) goes to the first page of the filtered list
 *  (of `project`, an admin's choice, kept). Its model field suggests what `suggestModels` is given. */
export function filterForm(filters, project = "") {
  const choice = (name, options) =>
    h("select", { id: `filter-${name}`, name }, options.map(([value, label]) => h("option", { value, selected: value === filters[name] }, label)));
  const text = (name, attrs) => h("input", { id: `filter-${name}`, name, value: filters[name], ...attrs });
  const form = h(
    "form",
    { id: "batch-filters", class: "filters" },
    choice("status", STATUSES),
    h("label", {}, "created since ", text("since", { type: "date" })),
    h("label", {}, "until ", text("until", { type: "date" })),
    choice("endpoint", [["", "any endpoint"], ...ENDPOINTS.map((e) => [e, e])]),
    text("model", { placeholder: "model", list: "filter-models", autocomplete: "off" }),
    h("datalist", { id: "filter-models" }),
    text("metadata", { placeholder: "metadata key=value", pattern: "[^=]+=.*", title: "key=value" }),
    h("button", { id: "filter-apply", type: "submit" }, "Filter"),
    anyFilter(filters) ? h("a", { id: "filter-clear", href: `#/batches${filterQuery({}, null, project)}` }, "Clear") : null,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = Object.fromEntries(FIELDS.map((name) => [name, form.elements[name].value.trim()]));
    location.hash = `#/batches${filterQuery(chosen, null, project)}`;
  });
  return form;
}

export function suggestModels(form, modelIds) {
  replace(form.querySelector("#filter-models"), modelIds.map((id) => h("option", { value: id })));
}
