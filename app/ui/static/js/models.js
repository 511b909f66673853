// The models page: each served model, its engine state and the lines the worker has on it.

import { api } from "./api.js";
import { errorBox, h, replace } from "./dom.js";
import * as fmt from "./format.js";

const REFRESH_MS = 2000;

export function modelsPage(root, ctx) {
  const list = h("div", { id: "models" }, h("p", { class: "muted" }, "Loading…"));
  replace(root, h("h1", {}, "Models"), list,
    h("p", { class: "muted small" }, "Lines in flight are those this server's worker has handed to the engine; waiting lines are queued for a slot."));
  ctx.loop(async () => {
    try {
      const models = (await api("/models")).data;
      replace(list, models.length ? modelTable(models) : h("p", { class: "muted" }, "No model is being served yet (engines starting?)."));
    } catch (error) {
      replace(list, errorBox(error));
    }
    return REFRESH_MS;
  });
}

function modelTable(models) {
  return h(
    "table",
    { class: "list" },
    h("thead", {}, h("tr", {}, ["Model", "Engine", "Lines in flight", "Waiting", "Since"].map((c) => h("th", {}, c)))),
    h(
      "tbody",
      {},
      models.map((m) =>
        h(
          "tr",
          { dataset: { modelId: m.id } },
          h("td", { class: "mono" }, m.id),
          h("td", {}, h("span", { class: `badge engine-${m.engine_state}` }, m.engine_state ?? "unknown")),
          h("td", { class: "num in-flight" }, `${fmt.count(m.lines_in_flight)} / ${fmt.count(m.max_lines_in_flight)}`),
          h("td", { class: "num" }, fmt.count(m.lines_waiting)),
          h("td", {}, fmt.time(m.created)),
        ),
      ),
    ),
  );
}
