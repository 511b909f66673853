// Progress, throughput and ETA of batches. A batch object carries only counts, so throughput
// over time comes from samples this tab takes while it is open (kept per batch in memory).

import { h } from "./dom.js";

export const ACTIVE = new Set(["validating", "in_progress", "finalizing", "cancelling"]);
export const isActive = (batch) => ACTIVE.has(batch.status);
export const linesDone = (batch) => batch.request_counts.completed + batch.request_counts.failed;

// A batch that ended by cancel or expiry counts its lines that never ran as failed
// (batch_cancelled / batch_expired), all at once when it ends. Throughput counts only lines that
// ran: its successes, and the failures this tab saw while it was still running.
const ENDED_EARLY = new Set(["cancelled", "expired"]);
const failedWhileRunning = new Map(); // batch id -> failed count last seen while active

/** Lines that ran (were answered by the engine), as far as this tab can tell. */
export function linesRan(batch) {
  const { completed, failed } = batch.request_counts;
  if (!ENDED_EARLY.has(batch.status)) return completed + failed;
  return completed + Math.min(failed, failedWhileRunning.get(batch.id) || 0);
}

const MAX_SAMPLES = 2000;
// The rate shown beside a running batch is measured over about this many recent seconds.
const RECENT_SECONDS = 10;
const samples = new Map(); // batch id -> [{t, done}]

/** Records the batch's counts now (seconds since the epoch, like the API's timestamps). */
export function sample(batch) {
  const list = samples.get(batch.id) || [];
  const t = Date.now() / 1000;
  if (isActive(batch)) failedWhileRunning.set(batch.id, batch.request_counts.failed);
  const done = linesRan(batch);
  const last = list[list.length - 1];
  if (last && last.done === done && isActive(batch) === false) return list;
  list.push({ t, done });
  if (list.length > MAX_SAMPLES) list.splice(0, list.length - MAX_SAMPLES);
  samples.set(batch.id, list);
  return list;
}

// A cancelled batch's lines stop when the cancel arrives, not when it is cancelled.
const endOfRun = (batch) =>
  batch.finalizing_at || batch.cancelling_at || batch.completed_at || batch.failed_at || batch.expired_at || batch.cancelled_at;

/** Lines per second over the whole run (from the batch's own timestamps). */
export function averageRate(batch) {
  if (!batch.in_progress_at) return null;
  const end = endOfRun(batch) || Date.now() / 1000;
  const elapsed = end - batch.in_progress_at;
  return elapsed >= 1 ? linesRan(batch) / elapsed : null;
}

/** Lines per second lately: from this tab's samples when it has some, else the run's average. */
export function currentRate(batch) {
  if (!isActive(batch)) return averageRate(batch);
  const list = samples.get(batch.id) || [];
  const last = list[list.length - 1];
  if (last) {
    const first = list.find((p) => p.t >= last.t - RECENT_SECONDS) || list[0];
    if (last.t - first.t >= 2) return (last.done - first.done) / (last.t - first.t);
  }
  return averageRate(batch);
}

/** Seconds until the last line is done at the current rate (null when unknown or finished). */
export function eta(batch) {
  if (batch.status !== "in_progress") return null;
  const rate = currentRate(batch);
  const left = batch.request_counts.total - linesDone(batch);
  return rate > 0 ? left / rate : null;
}

/** [{t, rate}] over the run: from this tab's samples; without any, the average as a flat line. */
export function throughputSeries(batch) {
  const list = [...(samples.get(batch.id) || [])];
  // The run started with nothing done: the stretch before this tab's first sample counts at
  // its average rate.
  if (batch.in_progress_at && (!list.length || list[0].t > batch.in_progress_at)) {
    list.unshift({ t: batch.in_progress_at, done: 0 });
  }
  const series = [];
  let previous = list[0];
  for (const point of list.slice(1)) {
    // Over at least a second: lines finish in bursts.
    if (point.t - previous.t >= 1) {
      series.push({ t: point.t, rate: Math.max(0, (point.done - previous.done) / (point.t - previous.t)) });
      previous = point;
    }
  }
  if (series.length >= 2) return { sampled: true, series };
  const average = averageRate(batch);
  const end = endOfRun(batch) || Date.now() / 1000;
  if (average === null || !batch.in_progress_at) return { sampled: false, series: [] };
  return { sampled: false, series: [{ t: batch.in_progress_at, rate: average }, { t: end, rate: average }] };
}

/** A progress bar of completed (and failed) over total lines; `aria-valuenow` is lines done. */
export function progressBar(batch) {
  const { total, completed, failed } = batch.request_counts;
  const pct = (n) => (total > 0 ? `${(100 * n) / total}%` : "0%");
  const ok = h("span", { class: "bar-ok" });
  const bad = h("span", { class: "bar-failed" });
  // Widths through the CSSOM: the page's CSP forbids inline style attributes.
  ok.style.width = pct(completed);
  bad.style.width = pct(failed);
  return h(
    "div",
    {
      class: "bar",
      role: "progressbar",
      "aria-valuemin": 0,
      "aria-valuemax": total,
      "aria-valuenow": completed + failed,
      "aria-valuetext": `${completed} completed, ${failed} failed of ${total}`,
      title: `${completed} completed, ${failed} failed of ${total}`,
      dataset: { batchId: batch.id },
    },
    ok,
    bad,
  );
}

export const statusBadge = (status) => h("span", { class: `badge status-${status}` }, status.replace("_", " "));
