/* The project server's REST API: JSON in and out, the session's CSRF token on every request. */


export class ApiError extends Error {
  constructor(err, status) {
    super(err.message || `HTTP ${status}`);
    this.code = err.code || `HTTP_${status}`; this.hint = err.hint || ''; this.details = err.details || {};
    this.file = err.file; this.line = err.line;
  }
}
// The session's CSRF token, put in the page by the server: every state-changing request sends it.
const CSRF = (document.querySelector('meta[name="aqven-csrf"]') || {}).content || '';
export async function api(path, opts = {}) {
  const init = { headers: { 'content-type': 'application/json', 'x-csrf-token': CSRF }, ...opts };
  if (opts.body !== undefined && typeof opts.body !== 'string') init.body = JSON.stringify(opts.body);
  const resp = await fetch(path, init);
  const text = await resp.text();
  const data = text ? JSON.parse(text) : null;
  if (!resp.ok) throw new ApiError((data && data.error) || {}, resp.status);
  return data;
}
