// The files page: upload (pick or drop, with a purpose), list (50 a page), download, delete.

import { api, downloadFile } from "./api.js";
import { errorBox, h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { projectFilter, projectQuery, scopedList, showProjects } from "./scope.js";

const PAGE_SIZE = 50;
const PURPOSES = ["batch", "user_data", "assistants", "fine-tune", "vision", "evals"];

export function filesPage(root, ctx, params) {
  const after = params.get("after");
  const purposeFilter = params.get("purpose") || "";
  const project = params.get("project") || "";
  const here = (changes) => {
    const query = new URLSearchParams({ ...(purposeFilter && { purpose: purposeFilter }), ...(project && { project }), ...changes });
    for (const [name, value] of [...query]) if (!value) query.delete(name);
    return `#/files${query.size ? `?${query}` : ""}`;
  };
  const status = h("div", { id: "upload-status", role: "status" });
  const list = h("div", { id: "files" }, h("p", { class: "muted" }, "Loading…"));
  const pager = h("div", { class: "pager" });
  const purpose = h("select", { id: "upload-purpose" }, PURPOSES.map((p) => h("option", { value: p }, p)));
  const input = h("input", { id: "upload-input", type: "file", class: "visually-hidden" });

  const upload = async (file) => {
    if (!file) return;
    replace(status, h("p", { class: "muted" }, `Uploading ${file.name}…`));
    const form = new FormData();
    form.append("purpose", purpose.value);
    form.append("file", file, file.name);
    try {
      const created = await api("/files", { method: "POST", form });
      replace(status, h("p", { class: "notice" }, `Uploaded ${created.filename} as ${created.id}.`));
      ctx.refresh();
    } catch (error) {
      replace(status, errorBox(error));
    }
    input.value = "";
  };
  input.addEventListener("change", () => upload(input.files[0]));
  const zone = h(
    "label",
    { class: "dropzone", for: "upload-input" },
    input,
    h("strong", {}, "Drop a file here"),
    " or click to pick one",
  );
  zone.addEventListener("dragover", (event) => {
    event.preventDefault();
    zone.classList.add("over");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("over");
    upload(event.dataTransfer.files[0]);
  });

  const filter = h(
    "select",
    { id: "purpose-filter", onchange: (e) => (location.hash = here({ purpose: e.target.value })) },
    h("option", { value: "" }, "all purposes"),
    [...PURPOSES, "batch_output"].map((p) => h("option", { value: p, selected: p === purposeFilter }, p)),
  );
  const projects = projectFilter(project, (p) => (location.hash = here({ project: p })));
  replace(
    root,
    h("h1", {}, "Files"),
    h("section", { class: "upload" }, h("label", {}, "Purpose ", purpose), zone, status),
    h("div", { class: "title-row" }, h("h2", {}, "Stored files"), h("span", { class: "spacer" }), projects, filter),
    list,
    pager,
  );

  ctx.loop(async () => {
    const query = new URLSearchParams({ limit: PAGE_SIZE });
    if (after) query.set("after", after);
    if (purposeFilter) query.set("purpose", purposeFilter);
    try {
      const { page, admin } = await scopedList("files", query, project);
      if (admin) showProjects(projects);
      replace(list, page.data.length ? fileTable(page.data, ctx, status, admin) : h("p", { class: "muted" }, "No files."));
      replace(
        pager,
        after ? h("a", { href: here({ after: "" }) }, "← Newest") : null,
        page.has_more ? h("a", { href: here({ after: page.last_id }) }, "Older →") : null,
      );
    } catch (error) {
      replace(list, errorBox(error));
    }
    return null; // refreshed after uploads and deletes, not on a timer
  });
}

function fileTable(files, ctx, status, admin) {
  const scope = (file) => (admin ? projectQuery(file.project) : "");
  const remove = async (file) => {
    if (!window.confirm(`Delete ${file.filename} (${file.id})?`)) return;
    try {
      await api(`/files/${encodeURIComponent(file.id)}${scope(file)}`, { method: "DELETE" });
      replace(status, h("p", { class: "notice" }, `Deleted ${file.id}.`));
    } catch (error) {
      replace(status, errorBox(error));
    }
    ctx.refresh();
  };
  const download = (file) =>
    downloadFile(file.id, file.filename, scope(file)).catch((error) => replace(status, errorBox(error)));
  const columns = ["File", ...(admin ? ["Project"] : []), "Name", "Purpose", "Size", "Created", "Expires", ""];
  return h(
    "table",
    { class: "list" },
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c)))),
    h(
      "tbody",
      {},
      files.map((file) =>
        h(
          "tr",
          { dataset: { fileId: file.id } },
          h("td", { class: "mono" }, file.id),
          admin ? h("td", { class: "project" }, file.project) : null,
          h("td", {}, file.filename),
          h("td", {}, file.purpose),
          h("td", { class: "num" }, fmt.bytes(file.bytes)),
          h("td", {}, fmt.time(file.created_at)),
          h("td", {}, fmt.time(file.expires_at)),
          h(
            "td",
            { class: "actions" },
            h("button", { type: "button", class: "download", onclick: () => download(file) }, "Download"),
            h("button", { type: "button", class: "danger delete", onclick: () => remove(file) }, "Delete"),
          ),
        ),
      ),
    ),
  );
}
