// The projects page (admin keys): every project, 50 a page, archived ones on request, and a form
// that creates one, through the Administration API (`/v1/organization/projects`, what
// `client.admin.organization.projects` calls). A project opens on its own page (project.js).

import { api } from "./api.js";
import { errorBox, h, replace } from "./dom.js";
import * as fmt from "./format.js";

const PAGE_SIZE = 50;

export const projectBadge = (status) => h("span", { class: `badge project-${status}` }, status);
export const projectLink = (id) => `#/project/${encodeURIComponent(id)}`;

export function projectsPage(root, ctx, params) {
  const after = params.get("after");
  const archived = params.get("archived") === "1";
  const here = (changes) => {
    const query = new URLSearchParams({ ...(archived && { archived: "1" }), ...changes });
    for (const [name, value] of [...query]) if (!value) query.delete(name);
    return `#/projects${query.size ? `?${query}` : ""}`;
  };
  const message = h("div", { id: "projects-message", role: "status" });
  const list = h("div", { id: "projects" }, h("p", { class: "muted" }, "Loading…"));
  const pager = h("div", { class: "pager" });
  const name = h("input", { id: "new-project-name", placeholder: "Team name", maxlength: 256, required: true });
  const form = h("form", { id: "new-project-form", class: "filters" },
    h("label", { for: "new-project-name" }, "New project"), name, h("button", { type: "submit" }, "Create project"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const project = await api("/organization/projects", { method: "POST", json: { name: name.value.trim() } });
      location.hash = projectLink(project.id);
    } catch (error) {
      replace(message, errorBox(error));
    }
  });
  const showArchived = h("input", { id: "show-archived", type: "checkbox", checked: archived,
    onchange: (event) => (location.hash = here({ archived: event.target.checked ? "1" : "", after: "" })) });
  replace(root,
    h("div", { class: "title-row" }, h("h1", {}, "Projects"), h("span", { class: "spacer" }),
      h("label", {}, showArchived, " show archived")),
    form, message, list, pager,
    h("p", { class: "muted small" }, "Projects, their keys, limits and model access are those of the Administration API (client.admin.organization.projects). Admin keys only."));

  ctx.loop(async () => {
    const query = new URLSearchParams({ limit: PAGE_SIZE, include_archived: archived });
    if (after) query.set("after", after);
    try {
      const page = await api(`/organization/projects?${query}`);
      replace(list, page.data.length ? projectTable(page.data) : h("p", { class: "muted" }, "No projects."));
      replace(pager,
        after ? h("a", { href: here({ after: "" }) }, "← First") : null,
        page.has_more ? h("a", { id: "projects-next", href: here({ after: page.last_id }) }, "Next →") : null);
    } catch (error) {
      replace(list, errorBox(error));
    }
    return null; // a list that changes by this page's own actions
  });
}

function projectTable(projects) {
  return h("table", { class: "list" },
    h("thead", {}, h("tr", {}, ["Project", "Id", "Status", "Created", "Archived"].map((c) => h("th", {}, c)))),
    h("tbody", {}, projects.map((p) =>
      h("tr", { dataset: { projectId: p.id, status: p.status } },
        h("td", {}, h("a", { href: projectLink(p.id) }, p.name)),
        h("td", { class: "mono" }, p.id),
        h("td", {}, projectBadge(p.status)),
        h("td", {}, fmt.time(p.created_at)),
        h("td", {}, fmt.time(p.archived_at))))));
}
