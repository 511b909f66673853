// One project (admin keys): its keys (each a service account; a new key's value is shown once),
// its daily rate limits per served model, batchd's weight and enqueued-token limit, the models
// it may use, and archiving it. Every change goes through the Administration API
// (`/v1/organization/projects/{id}/...`), as the openai client's admin resources make it.

import { api } from "./api.js";
import { errorBox, h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { projectBadge } from "./projects.js";

const DAILY = [
  ["batch_1_day_max_input_tokens", "Batch input tokens a day"],
  ["max_requests_per_1_day", "Requests a day"],
];
const numberOrNull = (input) => (input.value.trim() === "" ? null : Number(input.value));

export function projectPage(root, ctx, projectId) {
  const base = `/organization/projects/${encodeURIComponent(projectId)}`;
  const message = h("div", { id: "project-message", role: "status" });
  const newKey = h("div", { id: "new-key" }); // kept across refreshes: the value is never shown again
  const page = h("div", { id: "project", dataset: { projectId } }, h("p", { class: "muted" }, "Loading…"));
  replace(root, h("p", {}, h("a", { href: "#/projects" }, "← Projects")), page);

  /** Runs one change; says what it did, or why not, and redraws from the API. */
  const change = async (what, done) => {
    try {
      const result = await what();
      replace(message, h("p", { class: "notice" }, done(result)));
    } catch (error) {
      replace(message, errorBox(error));
    }
    ctx.refresh();
  };
  const actions = { base, change, newKey };

  ctx.loop(async () => {
    let project, keys, limits, permissions, models;
    try {
      [project, keys, limits, permissions, models] = await Promise.all([
        api(base),
        api(`${base}/api_keys?limit=100`),
        api(`${base}/rate_limits?limit=100`),
        api(`${base}/model_permissions`),
        api("/models"),
      ]);
    } catch (error) {
      replace(page, errorBox(error));
      return null;
    }
    page.dataset.status = project.status;
    const active = project.status === "active";
    replace(page,
      header(project, actions),
      message,
      active ? null : h("p", { class: "muted" }, "Archived: its keys are refused and nothing about it can change."),
      h("h2", {}, "Keys"), active ? keyForm(actions) : null, newKey, keyTable(keys.data, active, actions),
      h("h2", {}, "Rate limits (per UTC day)"), limitTable(limits.data, active, actions),
      h("h2", {}, "Scheduling"), schedulingForm(limits.data, active, actions),
      h("h2", {}, "Model access"), accessForm(permissions, models.data.map((m) => m.id), active, actions));
    return null; // redrawn after each change, not on a timer: a form being filled stays as it is
  });
}

function header(project, { base, change }) {
  const archive = async () => {
    if (!window.confirm(`Archive ${project.name} (${project.id})? Its keys stop working and its running batches are cancelled.`)) return;
    await change(() => api(`${base}/archive`, { method: "POST" }), () => `Archived ${project.id}.`);
  };
  return h("div", {},
    h("div", { class: "title-row" }, h("h1", {}, project.name), projectBadge(project.status), h("span", { class: "spacer" }),
      project.status === "active" ? h("button", { id: "archive-project", class: "danger", type: "button", onclick: archive }, "Archive project") : null),
    h("p", { class: "muted" }, h("span", { class: "mono" }, project.id), ` · created ${fmt.time(project.created_at)}`,
      project.archived_at ? ` · archived ${fmt.time(project.archived_at)}` : ""));
}

function keyForm({ base, change, newKey }) {
  const name = h("input", { id: "new-key-name", placeholder: "Service account name", maxlength: 256, required: true });
  const form = h("form", { id: "new-key-form", class: "filters" }, name, h("button", { type: "submit" }, "Create key"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    await change(
      () => api(`${base}/service_accounts`, { method: "POST", json: { name: name.value.trim() } }),
      (account) => {
        replace(newKey, h("div", { class: "card new-key" },
          h("p", {}, `The key of ${account.name} (${account.api_key.id}): copy it now, it is not shown again.`),
          h("input", { id: "new-key-value", class: "mono", readonly: true, value: account.api_key.value, size: 56,
            onfocus: (e) => e.target.select() })));
        return `Created ${account.id} with key ${account.api_key.id}.`;
      });
  });
  return form;
}

function keyTable(keys, active, { base, change }) {
  if (!keys.length) return h("p", { class: "muted", id: "keys" }, "No keys.");
  const remove = async (key) => {
    const account = key.owner.service_account;
    if (!window.confirm(`Delete ${account.name} and revoke its key ${key.id}?`)) return;
    await change(() => api(`${base}/service_accounts/${encodeURIComponent(account.id)}`, { method: "DELETE" }),
      () => `Deleted ${account.id}; its key ${key.id} is revoked.`);
  };
  return h("table", { class: "list", id: "keys" },
    h("thead", {}, h("tr", {}, ["Name", "Key", "Value", "Created", ""].map((c) => h("th", {}, c)))),
    h("tbody", {}, keys.map((key) =>
      h("tr", { dataset: { keyId: key.id } },
        h("td", {}, key.name),
        h("td", { class: "mono" }, key.id),
        h("td", { class: "mono" }, key.redacted_value),
        h("td", {}, fmt.time(key.created_at)),
        h("td", { class: "actions" }, active
          ? h("button", { type: "button", class: "danger delete-key", onclick: () => remove(key) }, "Delete")
          : null)))));
}

function limitTable(limits, active, { base, change }) {
  if (!limits.length) return h("p", { class: "muted", id: "limits" }, "No model is served.");
  const row = (limit) => {
    const inputs = DAILY.map(([field, label]) => h("input", { type: "number", min: 0, step: 1, name: field,
      "aria-label": label, placeholder: "no limit", value: limit[field] ?? "", disabled: !active }));
    const save = () => change(
      () => api(`${base}/rate_limits/${encodeURIComponent(limit.id)}`, { method: "POST",
        json: Object.fromEntries(DAILY.map(([field], i) => [field, numberOrNull(inputs[i])])) }),
      () => `Saved the limits of ${limit.model}.`);
    return h("tr", { dataset: { model: limit.model } },
      h("td", { class: "mono" }, limit.model),
      inputs.map((input) => h("td", {}, input)),
      h("td", { class: "actions" }, active ? h("button", { type: "button", class: "save-limit", onclick: save }, "Save") : null));
  };
  return h("table", { class: "list", id: "limits" },
    h("thead", {}, h("tr", {}, ["Model", ...DAILY.map(([, label]) => label), ""].map((c) => h("th", {}, c)))),
    h("tbody", {}, limits.map(row)));
}

/** Weight and max enqueued tokens are the project's, for every model: saved through the first
 *  model's rate limit object, which carries them as batchd's extra fields. */
function schedulingForm(limits, active, { base, change }) {
  if (!limits.length) return h("p", { class: "muted" }, "Set through a served model's rate limit: none is served.");
  const [first] = limits;
  const weight = h("input", { id: "project-weight", type: "number", min: 1, step: 1, value: first.weight, disabled: !active });
  const tokens = h("input", { id: "project-max-enqueued", type: "number", min: 0, step: 1, placeholder: "server default",
    value: first.max_enqueued_tokens ?? "", disabled: !active });
  const form = h("form", { id: "scheduling-form", class: "filters" },
    h("label", { for: "project-weight" }, "Weight"), weight,
    h("label", { for: "project-max-enqueued" }, "Max enqueued tokens per model"), tokens,
    active ? h("button", { type: "submit" }, "Save") : null);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    await change(
      () => api(`${base}/rate_limits/${encodeURIComponent(first.id)}`, { method: "POST",
        json: { weight: numberOrNull(weight), max_enqueued_tokens: numberOrNull(tokens) } }),
      () => "Saved the weight and the enqueued-token limit.");
  });
  return h("div", {}, form,
    h("p", { class: "muted small" }, "Weight: the project's share of each model while others also have work. Max enqueued tokens: prompt tokens of its queued and running batches per model."));
}

function accessForm(permissions, served, active, { base, change }) {
  const mode = h("select", { id: "models-mode", disabled: !active },
    h("option", { value: "deny_list", selected: permissions.mode === "deny_list" }, "every model but those ticked"),
    h("option", { value: "allow_list", selected: permissions.mode === "allow_list" }, "only the models ticked"));
  const listed = new Set(permissions.model_ids);
  const boxes = [...new Set([...served, ...permissions.model_ids])].sort().map((model) =>
    h("label", { class: "model-choice" },
      h("input", { type: "checkbox", name: "model", value: model, checked: listed.has(model), disabled: !active }),
      ` ${model}`));
  const form = h("form", { id: "models-form" },
    h("p", { class: "filters" }, h("label", { for: "models-mode" }, "The project may use"), mode),
    h("div", { class: "filters" }, boxes),
    active ? h("p", { class: "filters" },
      h("button", { type: "submit" }, "Save model access"),
      h("button", { type: "button", id: "models-reset", onclick: () => change(
        () => api(`${base}/model_permissions`, { method: "DELETE" }), () => "Every model is allowed again.") }, "Allow every model")) : null);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const ids = boxes.map((label) => label.querySelector("input")).filter((box) => box.checked).map((box) => box.value);
    await change(
      () => api(`${base}/model_permissions`, { method: "POST", json: { mode: mode.value, model_ids: ids } }),
      () => "Saved the model access.");
  });
  return form;
}
