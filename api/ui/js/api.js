// The console's only way to the agent: the public HTTP API (/v1/...), with the browser's credentials.
// Errors keep the API's stable code (error_code) so the pages can show it.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(path, { method = "GET", body, query } = {}) {
  let url = path;
  if (query) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== null && v !== undefined && v !== "") params.set(k, v);
    const text = params.toString();
    if (text) url += `?${text}`;
  }
  const init = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const response = await fetch(url, init);
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!response.ok) {
    const code = data && data.error_code ? data.error_code : response.status * 100;
    const message = data && data.message ? data.message : `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, code, message);
  }
  return data;
}

export function describe(err) {
  return err instanceof ApiError ? `${err.message} (${err.code})` : String(err);
}
