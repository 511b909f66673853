// Sign-in and the hash router (#/batches, #/batch/<id>, #/new-batch, #/files, #/models, #/queue, #/requests, and for admin
// keys #/usage, #/projects, #/project/<id>, #/audit).

import { isAdmin } from "./admin.js";
import { api, clearKey, getKey, setKey } from "./api.js";
import { auditPage } from "./audit.js";
import { batchPage } from "./batch.js";
import { batchesPage } from "./batches.js";
import { h, replace } from "./dom.js";
import { filesPage } from "./files.js";
import { modelsPage } from "./models.js";
import { newBatchPage } from "./new-batch.js";
import { projectPage } from "./project.js";
import { projectsPage } from "./projects.js";
import { queuePage } from "./queue.js";
import { requestsPage } from "./requests.js";
import { usagePage } from "./usage.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const signOutButton = document.getElementById("signout");
let current = null;

/** What a page gets: `loop(fn)` runs fn now and again after the ms it returns (null stops),
 *  until the user leaves the page; `refresh()` runs it again at once. */
function pageContext() {
  let timer = null;
  let run = 0; // a refresh while a run is awaiting the API supersedes it
  const ctx = {
    stopped: false,
    tick: null,
    loop(fn) {
      ctx.tick = async () => {
        clearTimeout(timer);
        const mine = ++run;
        let next = 5000;
        try {
          next = await fn();
        } catch (error) {
          console.error(error); // a page bug: keep refreshing rather than freeze
        }
        if (!ctx.stopped && mine === run && next) timer = setTimeout(ctx.tick, next);
      };
      if (!ctx.stopped) ctx.tick();
    },
    refresh() {
      if (ctx.tick && !ctx.stopped) ctx.tick();
    },
    stop() {
      ctx.stopped = true;
      clearTimeout(timer);
    },
  };
  return ctx;
}

function route() {
  if (current) current.stop();
  if (!getKey()) {
    signInPage();
    return;
  }
  nav.hidden = false;
  signOutButton.hidden = false;
  const [path, query = ""] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query);
  const parts = path.split("/").filter(Boolean);
  current = pageContext();
  const page = parts[0] || "batches";
  const section = { batch: "batches", "new-batch": "batches", project: "projects" }[page] || page;
  for (const link of nav.querySelectorAll("a")) link.classList.toggle("active", link.dataset.page === section);
  showAdminPages();
  if (page === "batch" && parts[1]) batchPage(main, current, decodeURIComponent(parts[1]), params);
  else if (page === "new-batch") newBatchPage(main, current, params);
  else if (page === "files") filesPage(main, current, params);
  else if (page === "models") modelsPage(main, current, params);
  else if (page === "queue") queuePage(main, current, params);
  else if (page === "requests") requestsPage(main, current, params);
  else if (page === "usage") usagePage(main, current, params);
  else if (page === "projects") projectsPage(main, current, params);
  else if (page === "project" && parts[1]) projectPage(main, current, decodeURIComponent(parts[1]));
  else if (page === "audit") auditPage(main, current, params);
  else batchesPage(main, current, params);
}

/** The admin pages' links, for admin keys only (the pages themselves answer others with the API's 403). */
function showAdminPages() {
  const key = getKey();
  isAdmin().then(
    (admin) => {
      if (getKey() !== key) return; // signed out or another key meanwhile
      for (const link of nav.querySelectorAll("a[data-admin]")) link.hidden = !admin;
    },
    () => {}, // not known (the server unreachable): left as they are, asked again on the next page
  );
}

function signInPage(reason) {
  if (current) current.stop();
  current = null;
  nav.hidden = true;
  signOutButton.hidden = true;
  for (const link of nav.querySelectorAll("a[data-admin]")) link.hidden = true;
  const key = h("input", { id: "signin-key", type: "password", autocomplete: "off", placeholder: "bd-…", required: true });
  const message = h("div", { id: "signin-message", role: "alert" }, reason ? h("p", { class: "error" }, reason) : null);
  const form = h(
    "form",
    { class: "signin", id: "signin" },
    h("h1", {}, "Sign in"),
    h("p", { class: "muted" }, "Use a batchd API key. It is kept in this tab only (session storage) and sent as the Bearer header."),
    h("label", {}, "API key ", key),
    h("button", { id: "signin-submit", type: "submit" }, "Sign in"),
    message,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    setKey(key.value.trim());
    try {
      await api("/batches?limit=1"); // proves the key before showing anything
      route();
    } catch (error) {
      clearKey();
      replace(message, h("p", { class: "error" }, error.message));
    }
  });
  replace(main, form);
  key.focus();
}

signOutButton.addEventListener("click", () => {
  clearKey();
  signInPage();
});
window.addEventListener("batchd:signed-out", (event) => {
  if (current) signInPage(event.detail); // not while the sign-in form checks a key itself
});
window.addEventListener("hashchange", route);
route();
