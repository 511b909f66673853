// The /v1 API with the signed-in key. The key lives in sessionStorage: it is gone when the tab
// closes and is sent only as the Authorization header, exactly as the openai client sends it.

const KEY = "batchd.apiKey";

export const getKey = () => sessionStorage.getItem(KEY);
export const setKey = (key) => sessionStorage.setItem(KEY, key);
export const clearKey = () => sessionStorage.removeItem(KEY);

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** Calls `/v1${path}`; returns the parsed JSON (or the Response when `raw`). Errors carry
 *  the OpenAI envelope's message; a 401 signs the user out. */
export async function api(path, { method = "GET", json, form, raw = false } = {}) {
  const headers = { Authorization: `Bearer ${getKey() || ""}` };
  let body;
  if (form) {
    body = form;
  } else if (json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  }
  const response = await fetch(`/v1${path}`, { method, headers, body });
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      message = (await response.json()).error.message || message;
    } catch {
      // not an error envelope: keep the status line
    }
    if (response.status === 401) {
      clearKey();
      window.dispatchEvent(new CustomEvent("batchd:signed-out", { detail: message }));
    }
    throw new ApiError(response.status, message);
  }
  return raw ? response : response.json();
}

/** Downloads a file's content through the API (a plain link could not send the Bearer header);
 *  `scope` is an admin's `?project=...` for another project's file. */
export async function downloadFile(fileId, filename, scope = "") {
  const response = await api(`/files/${encodeURIComponent(fileId)}/content${scope}`, { raw: true });
  const url = URL.createObjectURL(await response.blob());
  const link = document.createElement("a");
  link.href = url;
  link.download = filename || fileId;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
