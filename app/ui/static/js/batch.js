// One batch: progress, timeline, usage, throughput chart, results as they arrive, result files,
// validation errors, cancel, retry.

import { api, downloadFile } from "./api.js";
import { projectQuery } from "./scope.js";
import { throughputChart } from "./chart.js";
import { errorBox, h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { resultsPanel } from "./results.js";
import { currentRate, eta, isActive, progressBar, sample, statusBadge, throughputSeries } from "./stats.js";

const REFRESH_MS = 1000;
const CANCELLABLE = new Set(["validating", "in_progress", "finalizing"]);
// An ended batch has lines to retry unless every line succeeded (POST /retry answers 400 then).
const retryable = (batch) =>
  ["failed", "expired", "cancelled"].includes(batch.status) || (batch.status === "completed" && batch.request_counts.failed > 0);
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

export function batchPage(root, ctx, batchId, params) {
  // The title row, the results and the files table persist between refreshes, so the cancel,
  // retry and download buttons are never swapped out under a click; the rest is redrawn every second.
  // `?project=` (an admin's view of another project's batch) goes on every call.
  const scope = projectQuery(params.get("project"));
  const status = h("span", { id: "batch-status" });
  const message = h("div", { id: "batch-message" });
  const showError = (error) => replace(message, errorBox(error));
  let batch = null;
  const cancelButton = h("button", { id: "cancel-batch", class: "danger", type: "button", hidden: true,
    onclick: () => cancel(batch, message, ctx, scope) }, "Cancel batch");
  const pauseButton = h("button", { id: "pause-batch", type: "button", hidden: true,
    onclick: () => pauseOrResume(batch, message, ctx, scope) }, "Pause");
  const retryButton = h("button", { id: "retry-batch", type: "button", hidden: true,
    onclick: () => retry(batch, message, scope) }, "Retry failed lines");
  const origin = h("p", { id: "retry-of", class: "muted", hidden: true });
  const results = resultsPanel(batchId, scope);
  const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const filesSection = h("div", { id: "batch-files" });
  const page = h("div", { id: "batch", dataset: { batchId } },
    h("div", { class: "title-row" }, h("h1", {}, batchId), status, h("span", { class: "spacer" }), pauseButton, cancelButton, retryButton),
    origin, message, body, filesSection, results.element);
  replace(root, h("p", {}, h("a", { href: "#/batches" }, "← Batches")), page);
  const files = new Map(); // file id -> file object (metadata fetched once)
  let shownFiles = null;

  ctx.loop(async () => {
    try {
      batch = await api(`/batches/${encodeURIComponent(batchId)}${scope}`);
    } catch (error) {
      replace(body, errorBox(error));
      return isGone(error) ? null : REFRESH_MS * 5;
    }
    sample(batch);
    await loadFiles(batch, files, scope);
    page.dataset.status = batch.status;
    replace(status, statusBadge(batch.status), ...(batch.paused_at ? [h("span", { class: "muted" }, " paused")] : []));
    cancelButton.hidden = !CANCELLABLE.has(batch.status);
    pauseButton.hidden = batch.status !== "in_progress";
    pauseButton.textContent = batch.paused_at ? "Resume" : "Pause";
    retryButton.hidden = !retryable(batch);
    if (batch.retry_of && origin.hidden) {
      replace(origin, "Retry of ", h("a", { href: `#/batch/${encodeURIComponent(batch.retry_of)}` }, batch.retry_of));
      origin.hidden = false;
    }
    replace(body, render(batch));
    const fileKey = [batch.input_file_id, batch.output_file_id, batch.error_file_id].join("|");
    if (fileKey !== shownFiles) {
      replace(filesSection, h("h2", {}, "Files"), fileTable(batch, files, showError, scope));
      shownFiles = fileKey;
    }
    if (batch.status !== "validating") results.pull(); // not awaited: a long read never holds up the refresh
    return isActive(batch) || !results.done || batch.export?.status === "pending" ? REFRESH_MS : null;
  });
}

const isGone = (error) => error.status === 404 || error.status === 401;

async function loadFiles(batch, files, scope) {
  for (const id of [batch.input_file_id, batch.output_file_id, batch.error_file_id]) {
    if (id && !files.has(id)) {
      try {
        files.set(id, await api(`/files/${encodeURIComponent(id)}${scope}`));
      } catch {
        files.set(id, { id, filename: id, bytes: null, missing: true });
      }
    }
  }
}

async function cancel(batch, message, ctx, scope) {
  if (!window.confirm(`Cancel ${batch.id}? Lines not yet run will not run.`)) return;
  try {
    const updated = await api(`/batches/${encodeURIComponent(batch.id)}/cancel${scope}`, { method: "POST" });
    replace(message, h("p", { class: "notice" }, `Cancel requested: ${updated.status}.`));
  } catch (error) {
    replace(message, errorBox(error));
  }
  ctx.refresh();
}

// A paused batch stays in_progress with `paused_at` set: no line of it starts until it is resumed.
async function pauseOrResume(batch, message, ctx, scope) {
  const action = batch.paused_at ? "resume" : "pause";
  try {
    const updated = await api(`/batches/${encodeURIComponent(batch.id)}/${action}${scope}`, { method: "POST" });
    const text = updated.paused_at ? "Paused: lines in flight finish, no new line starts." : "Resumed.";
    replace(message, h("p", { class: "notice" }, text));
  } catch (error) {
    replace(message, errorBox(error));
  }
  ctx.refresh();
}

async function retry(batch, message, scope) {
  const what = batch.request_counts.failed ? `its ${fmt.count(batch.request_counts.failed)} lines that did not succeed` : "its lines";
  if (!window.confirm(`Run ${what} again as a new batch?`)) return;
  try {
    const again = await api(`/batches/${encodeURIComponent(batch.id)}/retry${scope}`, { method: "POST" });
    location.hash = `#/batch/${encodeURIComponent(again.id)}${scope}`;
  } catch (error) {
    replace(message, errorBox(error));
  }
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
    batch.export ? exportSection(batch.export) : null,
  );
}

// batchd's results by reference: where the files are copied once the batch ends, and how that went.
function exportSection(exported) {
  const where = exported.output_uri || `PUT URLs (${(exported.output_urls || []).join(", ")})`;
  return [
    h("h2", {}, "Export"),
    h("dl", { class: "kv", id: "batch-export" },
      h("dt", {}, "Status"), h("dd", {}, exported.status),
      h("dt", {}, "Destination"), h("dd", {}, where),
      h("dt", {}, "Attempts"), h("dd", {}, String(exported.attempts)),
      ...(exported.error ? [h("dt", {}, "Last error"), h("dd", {}, `${exported.error.code}: ${exported.error.message}`)] : [])),
  ];
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

function fileTable(batch, files, onError, scope) {
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
          ? h("button", { type: "button", dataset: { download: kind }, onclick: () => downloadFile(id, file.filename, scope).catch(onError) }, "Download")
          : null,
      ),
    );
  });
  return h("table", { class: "list compact" }, h("tbody", {}, rows));
}

/** A failed batch's line errors (also a quote's, new-batch.js), in a table with the given id. */
export function validationErrors(errors, id = "validation-errors") {
  return [
    h("h2", {}, `Validation errors (${errors.length})`),
    h(
      "table",
      { class: "list", id },
      h("thead", {}, h("tr", {}, ["Line", "Code", "Param", "Message"].map((c) => h("th", {}, c)))),
      h("tbody", {}, errors.map((e) => h("tr", {}, h("td", { class: "num" }, e.line ?? "—"), h("td", {}, e.code ?? ""),
        h("td", {}, e.param ?? ""), h("td", {}, e.message ?? "")))),
    ),
  ];
}
