// The queue page: the signed-in project's running and queued batches per model, its fair share
// and rate, each batch's projected finish (ETA) against its deadline, and batches at risk of
// missing it (they run ahead of fair share until they are back on time).

import { api } from "./api.js";
import { errorBox, h, replace } from "./dom.js";
import * as fmt from "./format.js";

const REFRESH_MS = 2000;

export function queuePage(root, ctx) {
  const list = h("div", { id: "queue" }, h("p", { class: "muted" }, "Loading…"));
  replace(root, h("h1", {}, "Queue"), list,
    h("p", { class: "muted small" },
      "Share: the project's part of the model's lines while other projects also have work, from the weights set with `batchd projects set NAME --weight N`. " +
      "ETA: projected from the project's recent rate, earliest deadline first. At risk: projected to finish too close to its deadline; it runs ahead of fair share."));
  ctx.loop(async () => {
    try {
      const projects = (await api("/queue")).data;
      replace(list, projects.length ? projects.map(projectCard) : h("p", { class: "muted", id: "queue-empty" }, "Nothing running or queued."));
    } catch (error) {
      replace(list, errorBox(error));
    }
    return REFRESH_MS;
  });
}

function projectCard(p) {
  return h(
    "section",
    { class: "queue-project", dataset: { project: p.project, model: p.model ?? "" } },
    h("h2", {}, `${p.project} · ${p.model ?? "model not known yet"}`),
    h("p", { class: "muted" },
      `weight ${p.weight} · share ${Math.round(p.share * 100)}% · ${fmt.rate(p.lines_per_second)} lines/s`),
    batchTable([...p.running.map((b) => [b, "running"]), ...p.queued.map((b) => [b, "queued"])]),
  );
}

function batchTable(rows) {
  const now = Date.now() / 1000;
  return h(
    "table",
    { class: "list" },
    h("thead", {}, h("tr", {}, ["Batch", "State", "Window", "Progress", "Lines/s", "ETA", "Deadline", ""].map((c) => h("th", {}, c)))),
    h(
      "tbody",
      {},
      rows.map(([b, state]) =>
        h(
          "tr",
          { dataset: { batchId: b.id, atRisk: String(b.at_risk) } },
          h("td", { class: "mono" }, h("a", { href: `#/batch/${encodeURIComponent(b.id)}` }, b.id)),
          h("td", {}, h("span", { class: "badge" }, state)),
          h("td", {}, b.completion_window),
          h("td", { class: "num" }, `${fmt.count(b.done)} / ${fmt.count(b.total)}`),
          h("td", { class: "num" }, fmt.rate(b.lines_per_second)),
          h("td", {}, b.eta === null ? "—" : `in ${fmt.duration(b.eta - now)}`),
          h("td", {}, `in ${fmt.duration(b.expires_at - now)}`),
          h("td", {}, b.at_risk ? h("span", { class: "badge at-risk" }, "at risk") : null),
        ),
      ),
    ),
  );
}
