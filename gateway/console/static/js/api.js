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

/** enc encodes one path segment. */
export const enc = encodeURIComponent;

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
