// The audit log page (admin keys): every change made through the Administration API or the CLI,
// newest first, 20 a page (the `after` cursor), filtered by event type, from
// GET /v1/organization/audit_logs (what `client.admin.organization.audit_logs.list` calls).

import { api } from "./api.js";
import { errorBox, h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { projectLink } from "./projects.js";

const PAGE_SIZE = 20;
const REFRESH_MS = 5000;
// The events batchd records (app/domains/organization/audit_log.py), under OpenAI's names.
const EVENT_TYPES = [
  "project.created", "project.updated", "project.archived",
  "service_account.created", "service_account.deleted",
  "api_key.created", "api_key.deleted",
  "rate_limit.updated", "resource.deleted",
];

export function auditPage(root, ctx, params) {
  const after = params.get("after");
  const type = params.get("type") || "";
  const here = (changes) => {
    const query = new URLSearchParams({ ...(type && { type }), ...changes });
    for (const [name, value] of [...query]) if (!value) query.delete(name);
    return `#/audit${query.size ? `?${query}` : ""}`;
  };
  const filter = h("select", { id: "audit-type", onchange: (e) => (location.hash = here({ type: e.target.value, after: "" })) },
    h("option", { value: "" }, "every event"),
    EVENT_TYPES.map((t) => h("option", { value: t, selected: t === type }, t)));
  const list = h("div", { id: "audit" }, h("p", { class: "muted" }, "Loading…"));
  const pager = h("div", { class: "pager" });
  replace(root, h("div", { class: "title-row" }, h("h1", {}, "Audit log"), h("span", { class: "spacer" }), filter), list, pager,
    h("p", { class: "muted small" }, "Actor: the key that made the change (CLI: a `batchd` command on the host, or open mode). Admin keys only."));

  ctx.loop(async () => {
    const query = new URLSearchParams({ limit: PAGE_SIZE });
    if (type) query.append("event_types[]", type);
    if (after) query.set("after", after);
    try {
      const page = await api(`/organization/audit_logs?${query}`);
      replace(list, page.data.length ? auditTable(page.data) : h("p", { class: "muted" }, "No events."));
      replace(pager,
        after ? h("a", { href: here({ after: "" }) }, "← Newest") : null,
        page.has_more ? h("a", { id: "audit-older", href: here({ after: page.last_id }) }, "Older →") : null);
    } catch (error) {
      replace(list, errorBox(error));
    }
    return after ? null : REFRESH_MS; // the newest page follows new events
  });
}

function auditTable(events) {
  return h("table", { class: "list" },
    h("thead", {}, h("tr", {}, ["When", "Event", "Project", "Actor", "Resource", "Details"].map((c) => h("th", {}, c)))),
    h("tbody", {}, events.map((event) => {
      const { id: resource, ...details } = event[event.type] || {};
      return h("tr", { dataset: { eventId: event.id, type: event.type, resource: resource ?? "" } },
        h("td", {}, fmt.time(event.effective_at)),
        h("td", {}, h("span", { class: "badge" }, event.type)),
        h("td", { class: "mono" }, event.project ? h("a", { href: projectLink(event.project.id) }, event.project.id) : "—"),
        h("td", { class: "mono" }, event.actor?.api_key?.id ?? "CLI"),
        h("td", { class: "mono" }, resource ?? "—"),
        h("td", { class: "mono small" }, Object.keys(details).length ? JSON.stringify(details) : ""));
    })));
}
