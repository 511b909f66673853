// Whose batches and files the lists show. An admin key sees every project's (the /v1 lists'
// `project` query parameter: `*` is every project the key may see, a name one project, which
// only an admin key may give for another project), with a project filter and the project on
// each row; any other key sees its own project's.

import { api, getKey } from "./api.js";
import { h } from "./dom.js";

let adminKey = null; // the signed-in key, once a list showed it is an admin key
const seen = new Set(); // projects met in admin lists: the filter's choices

/** A page of `/v1/${path}?${query}` for `project` ("" = every project the key may see: all of
 *  them for an admin key, whose rows then carry their `project`). Returns { page, admin }. */
export async function scopedList(path, query, project) {
  const scoped = new URLSearchParams(query);
  scoped.set("project", project || "*");
  const page = await api(`/${path}?${scoped}`);
  if (page.data.some((row) => "project" in row)) adminKey = getKey();
  const admin = adminKey !== null && adminKey === getKey();
  if (admin) page.data.forEach((row) => seen.add(row.project));
  return { page, admin };
}

/** The project filter (hidden until an admin list shows it): `go(project)` on a change. */
export function projectFilter(current, go) {
  return h(
    "select",
    { id: "project-filter", hidden: true, onchange: (event) => go(event.target.value) },
    h("option", { value: "" }, "all projects"),
    current ? h("option", { value: current, selected: true }, current) : null,
  );
}

/** Shows the filter with every project met so far (options are added, never rebuilt: a choice
 *  being made is not disturbed by a refresh). */
export function showProjects(filter) {
  filter.hidden = false;
  const listed = new Set([...filter.options].map((option) => option.value));
  for (const project of [...seen].sort()) {
    if (!listed.has(project)) filter.append(h("option", { value: project }, project));
  }
}

/** `?project=...` for an admin's view of one project's batch or file ("" for the key's own). */
export const projectQuery = (project) => (project ? `?project=${encodeURIComponent(project)}` : "");
