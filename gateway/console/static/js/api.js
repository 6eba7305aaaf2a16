// api.js: the console's only way to the gateway. Every call goes to the
// admin API of this same origin with the admin key as a Bearer header; the
// key lives in this tab's sessionStorage (never a URL, a cookie or
// localStorage), so it is gone when the tab closes.

const KEY = 'switchyard.adminKey';

export function adminKey() {
  return sessionStorage.getItem(KEY) || '';
}

export function setAdminKey(k) {
  if (k) sessionStorage.setItem(KEY, k);
  else sessionStorage.removeItem(KEY);
}

/** ApiError carries the admin API's OpenAI-style error: status, message, param (the field). */
export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || '';
    this.type = e.type || '';
    this.param = e.param || '';
  }

  /** notAvailable: this gateway has no such endpoint (an older build). */
  get notAvailable() {
    return this.status === 404 && this.code === 'unknown_url';
  }

  get unauthorized() {
    return this.status === 401;
  }
}

let onUnauthorized = () => {};

/** whenUnauthorized registers what to do when the key stops working. */
export function whenUnauthorized(fn) {
  onUnauthorized = fn;
}

const TIMEOUT_MS = 8000;

/**
 * call sends one admin API request and returns the parsed JSON body. A
 * non-2xx answer throws ApiError; a 401 also signs the tab out. Each call
 * is bounded by a timeout so a stalled gateway never freezes a view.
 */
export async function call(method, path, body, { key = adminKey(), signOutOn401 = true } = {}) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS);
  const init = {
    method,
    headers: { Authorization: 'Bearer ' + key, Accept: 'application/json' },
    signal: ctl.signal,
    cache: 'no-store',
    credentials: 'omit',
    referrerPolicy: 'no-referrer',
  };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, { error: { message: ctl.signal.aborted ? 'the gateway did not answer within 8 s' : 'the gateway is unreachable: ' + err.message } });
  } finally {
    clearTimeout(timer);
  }
  let data = null;
  const text = await res.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { error: { message: text.slice(0, 200) } };
    }
  }
  if (!res.ok) {
    const err = new ApiError(res.status, data);
    if (err.unauthorized && signOutOn401) onUnauthorized(err);
    throw err;
  }
  return data;
}

export const get = (path, opts) => call('GET', path, undefined, opts);
export const put = (path, body) => call('PUT', path, body);
export const post = (path, body) => call('POST', path, body);
export const del = (path) => call('DELETE', path);

/** enc encodes one query value (admin paths are built with adminPath). */
export const enc = encodeURIComponent;

/**
 * adminPath builds an admin API path that names exactly the entities
 * interpolated in it: adminPath`/admin/teams/${team}/users/${user}`. Each
 * value is encoded as one segment. A value that is a whole segment "." or
 * ".." (an end user, a request id, a model or a deployment may be named so)
 * is a dot segment that fetch's URL parser resolves away, also when
 * written %2E (WHATWG URL, "single-dot" and "double-dot URL path
 * segment"): /admin/teams/t/users/.. would fetch /admin/teams/t/. Such a
 * value is joined to the segment before it by an escaped slash instead
 * (/admin/teams/t/users%2F..), which no client resolves and which the
 * gateway decodes back to /users/.. before it routes.
 */
export function adminPath(strings, ...values) {
  let out = strings[0];
  values.forEach((v, i) => {
    const seg = encodeURIComponent(String(v));
    const next = strings[i + 1];
    const whole = out.endsWith('/') && (next === '' || /^[/?#]/.test(next));
    if (whole && (seg === '.' || seg === '..')) out = out.slice(0, -1) + '%2F' + seg;
    else out += seg;
    out += next;
  });
  return out;
}

/**
 * optional runs an API read and turns "this gateway has no such endpoint"
 * into {missing: true}, so a view can say so instead of failing.
 */
export async function optional(promise) {
  try {
    return { data: await promise };
  } catch (err) {
    if (err instanceof ApiError && err.notAvailable) return { missing: true };
    throw err;
  }
}
