// The new-batch page: pick an uploaded `purpose=batch` file, the endpoint and the completion
// window; "Get quote" asks `POST /v1/batches/estimate` with the body create would send and shows
// the lines, tokens, cost and projected finish, or the line errors the batch would fail with;
// "Create" sends that same body to `POST /v1/batches` and opens the new batch.

import { api } from "./api.js";
import { OPENAI_ENDPOINTS } from "./batch-filters.js";
import { validationErrors } from "./batch.js";
import { errorBox, h, replace } from "./dom.js";
import * as fmt from "./format.js";

// The default windows; the server's are a setting, so any may be typed and the server says no.
const WINDOWS = ["24h", "1h"];
const FILES_SHOWN = 100;

export function newBatchPage(root, ctx, params) {
  const file = h("select", { id: "new-batch-file", required: true }, h("option", { value: "" }, "Loading files…"));
  const endpoint = h("select", { id: "new-batch-endpoint" }, OPENAI_ENDPOINTS.map((e) => h("option", { value: e }, e)));
  const windows = h("datalist", { id: "new-batch-windows" }, WINDOWS.map((w) => h("option", { value: w })));
  const completion = h("input", { id: "new-batch-window", value: WINDOWS[0], list: "new-batch-windows", size: 6, required: true });
  const quote = h("div", { id: "quote", role: "status" });
  const message = h("div", { id: "new-batch-message", role: "status" });
  const body = () => ({ input_file_id: file.value, endpoint: endpoint.value, completion_window: completion.value.trim() });

  // A quote is of the body it was asked for: any change of the form drops it, and an answer
  // that arrives after a change is not shown.
  let asked = 0;
  const stale = () => {
    asked += 1;
    replace(quote);
  };
  for (const field of [file, endpoint, completion]) field.addEventListener("input", stale);

  const getQuote = async () => {
    const mine = ++asked;
    replace(quote, h("p", { class: "muted" }, "Validating the file…"));
    try {
      const answer = await api("/batches/estimate", { method: "POST", json: body() });
      if (mine === asked) replace(quote, quoteView(answer));
    } catch (error) {
      if (mine === asked) replace(quote, errorBox(error));
    }
  };
  const form = h(
    "form",
    { id: "new-batch-form", class: "filters" },
    h("label", { for: "new-batch-file" }, "Input file"), file,
    h("label", { for: "new-batch-endpoint" }, "Endpoint"), endpoint,
    h("label", { for: "new-batch-window" }, "Window"), completion, windows,
    h("button", { id: "get-quote", type: "button", onclick: getQuote }, "Get quote"),
    h("button", { id: "create-batch", type: "submit" }, "Create"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const batch = await api("/batches", { method: "POST", json: body() });
      location.hash = `#/batch/${encodeURIComponent(batch.id)}`;
    } catch (error) {
      replace(message, errorBox(error));
    }
  });
  replace(
    root,
    h("p", {}, h("a", { href: "#/batches" }, "← Batches")),
    h("h1", {}, "New batch"),
    h("p", { class: "muted" }, "From a file uploaded with purpose batch (", h("a", { href: "#/files" }, "Files"),
      "). A quote validates the file as the batch would and projects its finish; it creates nothing."),
    form,
    message,
    quote,
  );

  ctx.loop(async () => {
    try {
      const files = (await api(`/files?purpose=batch&limit=${FILES_SHOWN}`)).data;
      const wanted = params.get("file");
      replace(
        file,
        files.length ? null : h("option", { value: "" }, "No batch files: upload one on the Files page"),
        files.map((f) => h("option", { value: f.id, selected: f.id === wanted }, `${f.filename} (${f.id}, ${fmt.bytes(f.bytes)})`)),
      );
    } catch (error) {
      replace(message, errorBox(error));
    }
    return null; // listed once: a form being filled stays as it is
  });
}

function quoteView(q) {
  if (q.errors) {
    return [
      h("p", { class: "error", id: "quote-invalid" },
        `This file would fail validation: ${fmt.count(q.errors.data.length)} line error(s), nothing would run.`),
      validationErrors(q.errors.data, "quote-errors"),
    ];
  }
  const cost = q.cost
    ? `${q.cost.total.toFixed(6)} ${q.cost.currency.toUpperCase()} (input ${q.cost.input.toFixed(6)}, output at most ${q.cost.output.toFixed(6)})`
    : "— (the model has no pricing)";
  const finish = q.projected_finish_at === null ? null : q.projected_finish_at - Date.now() / 1000;
  const rows = [
    ["model", "Model", q.model],
    ["lines", "Lines", fmt.count(q.lines)],
    ["input-tokens", "Input tokens", fmt.count(q.input_tokens)],
    ["output-tokens", "Output tokens, at most", q.max_output_tokens === null ? "— (a line sets no cap and the model's context length is not configured)" : fmt.count(q.max_output_tokens)],
    ["cost", "Cost, at most", cost],
    ["rate", "Rate", q.lines_per_second === null ? "— (no rate measured yet)" : `${fmt.rate(q.lines_per_second)} lines/s`],
    ["start", "Projected start", fmt.time(q.projected_start_at)],
    ["finish", "Projected finish", finish === null ? "—" : `${fmt.time(q.projected_finish_at)} (in ${fmt.duration(finish)})`],
    ["expires", "Window ends", fmt.time(q.expires_at)],
  ];
  return h(
    "div",
    { class: "card quote", dataset: { feasible: String(q.feasible), atRisk: String(q.at_risk) } },
    h("div", { class: "title-row" }, h("h2", {}, "Quote"), windowBadge(q)),
    h("dl", { class: "kv" }, rows.map(([key, label, value]) => [h("dt", {}, label), h("dd", { dataset: { field: key } }, value)])),
  );
}

function windowBadge(q) {
  if (q.feasible === null) return h("span", { class: "badge", id: "quote-window" }, "finish unknown: no rate yet");
  if (!q.feasible) return h("span", { class: "badge at-risk", id: "quote-window" }, "would not finish in the window");
  if (q.at_risk) return h("span", { class: "badge at-risk", id: "quote-window" }, "at risk: finishes in the window's last tenth");
  return h("span", { class: "badge status-completed", id: "quote-window" }, "fits the window");
}
