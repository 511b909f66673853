// One batch: progress, timeline, usage, throughput chart, result files, validation errors, cancel.

import { api, downloadFile } from "./api.js";
import { throughputChart } from "./chart.js";
import { errorBox, h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { currentRate, eta, isActive, progressBar, sample, statusBadge, throughputSeries } from "./stats.js";

const REFRESH_MS = 1000;
const CANCELLABLE = new Set(["validating", "in_progress", "finalizing"]);
const TIMELINE = [
  ["created_at", "created (validating)"],
  ["in_progress_at", "in progress"],
  ["finalizing_at", "finalizing"],
  ["completed_at", "completed"],
  ["failed_at", "failed"],
  ["cancelling_at", "cancelling"],
  ["cancelled_at", "cancelled"],
  ["expired_at", "expired"],
];

export function batchPage(root, ctx, batchId) {
  // The title row and the files table persist between refreshes, so the cancel and download
  // buttons are never swapped out under a click; the rest is redrawn every second.
  const status = h("span", { id: "batch-status" });
  const message = h("div", { id: "batch-message" });
  const showError = (error) => replace(message, errorBox(error));
  let batch = null;
  const cancelButton = h("button", { id: "cancel-batch", class: "danger", type: "button", hidden: true,
    onclick: () => cancel(batch, message, ctx) }, "Cancel batch");
  const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const filesSection = h("div", { id: "batch-files" });
  const page = h("div", { id: "batch", dataset: { batchId } },
    h("div", { class: "title-row" }, h("h1", {}, batchId), status, h("span", { class: "spacer" }), cancelButton),
    message, body, filesSection);
  replace(root, h("p", {}, h("a", { href: "#/batches" }, "← Batches")), page);
  const files = new Map(); // file id -> file object (metadata fetched once)
  let shownFiles = null;

  ctx.loop(async () => {
    try {
      batch = await api(`/batches/${encodeURIComponent(batchId)}`);
    } catch (error) {
      replace(body, errorBox(error));
      return isGone(error) ? null : REFRESH_MS * 5;
    }
    sample(batch);
    await loadFiles(batch, files);
    page.dataset.status = batch.status;
    replace(status, statusBadge(batch.status));
    cancelButton.hidden = !CANCELLABLE.has(batch.status);
    replace(body, render(batch));
    const fileKey = [batch.input_file_id, batch.output_file_id, batch.error_file_id].join("|");
    if (fileKey !== shownFiles) {
      replace(filesSection, h("h2", {}, "Files"), fileTable(batch, files, showError));
      shownFiles = fileKey;
    }
    return isActive(batch) ? REFRESH_MS : null;
  });
}

const isGone = (error) => error.status === 404 || error.status === 401;

async function loadFiles(batch, files) {
  for (const id of [batch.input_file_id, batch.output_file_id, batch.error_file_id]) {
    if (id && !files.has(id)) {
      try {
        files.set(id, await api(`/files/${encodeURIComponent(id)}`));
      } catch {
        files.set(id, { id, filename: id, bytes: null, missing: true });
      }
    }
  }
}

async function cancel(batch, message, ctx) {
  if (!window.confirm(`Cancel ${batch.id}? Lines not yet run will not run.`)) return;
  try {
    const updated = await api(`/batches/${encodeURIComponent(batch.id)}/cancel`, { method: "POST" });
    replace(message, h("p", { class: "notice" }, `Cancel requested: ${updated.status}.`));
  } catch (error) {
    replace(message, errorBox(error));
  }
  ctx.refresh();
}

function render(batch) {
  const { total, completed, failed } = batch.request_counts;
  const usage = batch.usage;
  const chart = throughputSeries(batch);
  return h(
    "div",
    {},
    h("p", { class: "muted" }, `${fmt.api(batch)} · ${batch.endpoint} · ${batch.model || "model not known yet"} · window ${batch.completion_window}`),
    h(
      "section",
      { class: "cards" },
      card("Progress", progressBar(batch), h("div", { class: "big" }, `${fmt.count(completed + failed)} / ${fmt.count(total)}`),
        h("div", { class: "muted small" }, `${fmt.count(completed)} completed · ${fmt.count(failed)} failed`)),
      card("Throughput", h("div", { class: "big" }, `${fmt.rate(currentRate(batch))} lines/s`),
        h("div", { class: "muted small" }, isActive(batch) ? `ETA ${fmt.duration(eta(batch))}` : "run average")),
      card("Tokens", h("div", { class: "big" }, fmt.count(usage.total_tokens)),
        h("div", { class: "muted small" },
          `${fmt.count(usage.input_tokens)} in (${fmt.count(usage.input_tokens_details.cached_tokens)} cached) · ` +
          `${fmt.count(usage.output_tokens)} out (${fmt.count(usage.output_tokens_details.reasoning_tokens)} reasoning)`)),
    ),
    h(
      "section",
      { class: "two-col" },
      h("div", {}, h("h2", {}, "Timeline"), timeline(batch)),
      h(
        "div",
        {},
        h("h2", {}, "Throughput over time"),
        throughputChart(chart.series, chart.sampled ? "lines/s, sampled while this page is open" : "lines/s, run average"),
      ),
    ),
    batch.errors ? validationErrors(batch.errors.data) : null,
    batch.metadata && Object.keys(batch.metadata).length
      ? [h("h2", {}, "Metadata"), h("dl", { class: "kv" }, Object.entries(batch.metadata).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]))]
      : null,
  );
}

const card = (title, ...children) => h("div", { class: "card" }, h("div", { class: "card-title" }, title), ...children);

function timeline(batch) {
  const steps = TIMELINE.filter(([key]) => batch[key]).sort((a, b) => batch[a[0]] - batch[b[0]]);
  const rows = steps.map(([key, label], i) =>
    h("li", { dataset: { step: key } }, h("span", { class: "when" }, fmt.time(batch[key])), h("span", {}, label),
      i > 0 ? h("span", { class: "muted small" }, ` +${fmt.duration(batch[key] - batch[steps[i - 1][0]])}`) : null),
  );
  if (batch.expires_at && isActive(batch)) {
    rows.push(h("li", { class: "muted" }, h("span", { class: "when" }, fmt.time(batch.expires_at)), h("span", {}, "expires")));
  }
  return h("ol", { class: "timeline", id: "timeline" }, rows);
}

function fileTable(batch, files, onError) {
  const rows = [
    ["input", batch.input_file_id],
    ["output", batch.output_file_id],
    ["error", batch.error_file_id],
  ].map(([kind, id]) => {
    const file = id ? files.get(id) : null;
    return h(
      "tr",
      {},
      h("td", {}, kind),
      h("td", {}, id || h("span", { class: "muted" }, kind === "input" ? "—" : "none")),
      h("td", { class: "num" }, file ? fmt.bytes(file.bytes) : ""),
      h(
        "td",
        {},
        file && !file.missing
          ? h("button", { type: "button", dataset: { download: kind }, onclick: () => downloadFile(id, file.filename).catch(onError) }, "Download")
          : null,
      ),
    );
  });
  return h("table", { class: "list compact" }, h("tbody", {}, rows));
}

function validationErrors(errors) {
  return [
    h("h2", {}, `Validation errors (${errors.length})`),
    h(
      "table",
      { class: "list", id: "validation-errors" },
      h("thead", {}, h("tr", {}, ["Line", "Code", "Param", "Message"].map((c) => h("th", {}, c)))),
      h("tbody", {}, errors.map((e) => h("tr", {}, h("td", { class: "num" }, e.line ?? "—"), h("td", {}, e.code ?? ""),
        h("td", {}, e.param ?? ""), h("td", {}, e.message ?? "")))),
    ),
  ];
}
