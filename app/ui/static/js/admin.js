// Whether the signed-in key is an admin key, asked of the Administration API itself once per key
// (GET /v1/organization/projects answers any other key 403), so the nav offers the admin pages
// (Projects, Audit log, Usage) only to keys that may use them.

import { api, getKey } from "./api.js";

let asked = { key: null, answer: null };

/** Resolves to true for an admin key (every key in open mode), false for any other. */
export function isAdmin() {
  const key = getKey();
  if (asked.key !== key) {
    const answer = api("/organization/projects?limit=1").then(
      () => true,
      (error) => {
        if (error.status === 403) return false;
        asked = { key: null, answer: null }; // not an answer (a network error): ask again next time
        throw error;
      },
    );
    asked = { key, answer };
  }
  return asked.answer;
}
