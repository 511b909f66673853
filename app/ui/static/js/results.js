// A batch's results as they arrive, from batchd's GET /v1/batches/{id}/results: JSONL of the
// lines finished so far (OpenAI's output/error line format), read on from the x-results-cursor
// of the last read; x-batch-incomplete says more lines will come. Filtered by outcome, or one
// custom_id searched. The tab shows at most SHOW lines at a time ("Show more" adds SHOW): the
// output and error files hold them all.

import { api } from "./api.js";
import { h, replace } from "./dom.js";

const PAGE = 100; // lines per read
const READS_PER_PULL = 5; // reads in one refresh, so a long backlog does not hold up the page
const SHOW = 500;
const OUTCOMES = [
  ["", "all results"],
  ["completed", "succeeded"],
  ["failed", "failed"],
];

const failed = (line) => line.error != null || !line.response || line.response.status_code !== 200;

/** {element, pull(), done}: `pull()` reads what finished since the last read (the page calls it
 *  on every refresh); `done` once nothing more can come for the current filter, or it shows its
 *  limit ("Show more" reads on by itself). */
export function resultsPanel(batchId, scope = "") {
  let view = null; // what is shown now: a filter, its lines and where to read on
  const outcome = h("select", { id: "results-outcome", name: "outcome" },
    OUTCOMES.map(([value, label]) => h("option", { value }, label)));
  const search = h("input", { id: "results-search", type: "search", name: "custom_id", placeholder: "custom_id", autocomplete: "off" });
  const form = h("form", { class: "filters", id: "results-filters" }, outcome, search, h("button", { type: "submit" }, "Show"));
  const summary = h("p", { id: "results-summary", class: "muted small", role: "status" });
  const rows = h("tbody", {});
  const more = h("button", { id: "results-more", type: "button", hidden: true }, "Show more");
  const element = h("section", { id: "batch-results" }, h("h2", {}, "Results"), form, summary,
    h("div", { class: "scroll" }, h("table", { class: "list compact", id: "results" },
      h("thead", {}, h("tr", {}, ["custom_id", "Outcome", "Result"].map((c) => h("th", {}, c)))), rows)),
    more);

  const panel = {
    element,
    get done() {
      return view.done || (!view.customId && view.lines >= view.limit);
    },
    pull: async () => {
      const mine = view;
      if (mine.done || mine.busy) return;
      mine.busy = true;
      try {
        await (mine.customId ? readOne(mine) : readOn(mine));
        mine.error = null;
      } catch (error) {
        mine.error = error;
        mine.done = error.status >= 400 && error.status < 500; // a 5xx is tried again on the next refresh
      } finally {
        mine.busy = false;
      }
      if (mine === view) show(mine);
    },
  };

  const start = () => {
    view = { status: outcome.value, customId: search.value.trim(), lines: 0, cursor: null, incomplete: true,
      limit: SHOW, done: false, busy: false, error: null };
    replace(rows);
    replace(summary, "Loading…");
    more.hidden = true;
  };

  async function read(mine, query) {
    // `scope` is "" or "?project=..." (an admin's view of another project's batch).
    const scoped = scope ? `${query}&${scope.slice(1)}` : query;
    const response = await api(`/batches/${encodeURIComponent(batchId)}/results?${scoped}`, { raw: true });
    const text = await response.text();
    if (mine !== view) return null; // the filter changed meanwhile
    mine.incomplete = response.headers.get("x-batch-incomplete") === "true";
    mine.cursor = response.headers.get("x-results-cursor") || mine.cursor;
    return text.split("\n").filter((raw) => raw.trim()).map((raw) => JSON.parse(raw));
  }

  async function readOn(mine) {
    for (let reads = 0; reads < READS_PER_PULL && mine.lines < mine.limit; reads += 1) {
      const want = Math.min(PAGE, mine.limit - mine.lines);
      const query = new URLSearchParams({ limit: want });
      if (mine.status) query.set("status", mine.status);
      if (mine.cursor) query.set("after", mine.cursor);
      const lines = await read(mine, query);
      if (lines === null) return;
      rows.append(...lines.map(resultRow));
      mine.lines += lines.length;
      if (lines.length < want) {
        mine.done = !mine.incomplete; // caught up: nothing more unless the batch still runs
        return;
      }
    }
  }

  async function readOne(mine) {
    const lines = await read(mine, new URLSearchParams({ custom_id: mine.customId }));
    if (lines === null) return;
    replace(rows, lines.map(resultRow));
    mine.lines = lines.length;
    mine.done = lines.length > 0 || !mine.incomplete; // not finished yet: look again next time
  }

  function show(mine) {
    const capped = mine.lines >= mine.limit;
    more.hidden = !capped;
    let text;
    if (mine.error) text = `Results could not be read: ${mine.error.message}`;
    else if (mine.customId) text = mine.lines ? "" : `${mine.customId}: ${mine.incomplete ? "not finished yet" : "no such line"}`;
    else if (capped) text = `First ${mine.lines.toLocaleString("en-US")} lines shown; the output and error files hold them all.`;
    else text = `${mine.lines.toLocaleString("en-US")} lines${mine.incomplete ? " so far; more appear as they finish" : ""}.`;
    replace(summary, text);
    summary.classList.toggle("error", Boolean(mine.error));
    element.dataset.lines = String(mine.lines);
    element.dataset.incomplete = String(mine.incomplete);
  }

  more.addEventListener("click", () => {
    view.limit += SHOW;
    view.done = false;
    panel.pull();
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    start();
    panel.pull();
  });
  outcome.addEventListener("change", () => {
    start();
    panel.pull();
  });
  start();
  return panel;
}

function resultRow(line) {
  const bad = failed(line);
  const code = line.response ? String(line.response.status_code) : line.error?.code || "error";
  return h(
    "tr",
    { dataset: { customId: String(line.custom_id ?? ""), outcome: bad ? "failed" : "succeeded" } },
    h("td", { class: "mono" }, line.custom_id ?? "—"),
    h("td", {}, h("span", { class: `badge ${bad ? "status-failed" : "status-completed"}` }, code)),
    h("td", {}, h("details", {}, h("summary", {}, gist(line)), h("pre", { class: "mono" }, JSON.stringify(line, null, 2)))),
  );
}

/** One line's result in a few words: the answer's text, or the error's message. */
function gist(line) {
  const body = line.response?.body;
  const text = failed(line)
    ? line.error?.message || body?.error?.message || JSON.stringify(body)
    : body?.choices?.[0]?.message?.content ??
      body?.choices?.[0]?.text ??
      body?.content?.[0]?.text ??
      body?.output_text ??
      body?.text ??
      (Array.isArray(body?.data) ? `${body.data.length} result${body.data.length === 1 ? "" : "s"}` : JSON.stringify(body));
  const flat = String(text ?? "").replace(/\s+/g, " ").trim();
  return flat.length > 140 ? `${flat.slice(0, 140)}…` : flat || "(empty)";
}
