// The console's only way to the agent: the public HTTP API (/v1/...), and the schema registry's
// Confluent-compatible API under /schema-registry, with the browser's credentials. Errors keep the API's
// stable code (error_code) so the pages can show it.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(path, { method = "GET", body, query, headers = {} } = {}) {
  let url = path;
  if (query) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== null && v !== undefined && v !== "") params.set(k, v);
    const text = params.toString();
    if (text) url += `?${text}`;
  }
  const init = { method, credentials: "same-origin", headers: { ...headers } };
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
  if (err instanceof ApiError && err.status === 403) return `Permission denied: ${err.message} (${err.code})`;
  return err instanceof ApiError ? `${err.message} (${err.code})` : String(err);
}

// The schema registry on this agent (api/registry/ under /schema-registry), with the same credentials.
// The extra header asks for the fields newer registries add (a version's "deleted" flag).
export const REGISTRY = "/schema-registry";

export function registry(path, options = {}) {
  const headers = { "Confluent-Accept-Unknown-Properties": "true", ...(options.headers || {}) };
  return api(`${REGISTRY}${path}`, { ...options, headers });
}
