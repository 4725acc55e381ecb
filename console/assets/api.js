// The fetch wrapper every page uses, and the signed-in session.
//
// The session cookie is HttpOnly, so JS never sees it: what JS keeps is the
// session object the server answers (name, role, csrf_token). Every request
// that changes state carries the CSRF token in X-CSRF-Token; the cookie
// goes along by itself (same-origin).

import {t} from './i18n.js';

// A failed call: status 0 for a network failure, otherwise the HTTP
// status with the API's error code, message and (for 400s) field path.
export class ApiError extends Error {
  constructor(status, code, message, field, retryAfter) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.field = field || null;
    this.retryAfter = retryAfter || null;
  }
}

let current = null; // {name, role, csrf_token, expires_at} or null
let unauthorized = () => {};

export function getSession() {
  return current;
}

export function setSession(s) {
  current = s || null;
}

// The roles in rising order: each may do what those before it may. The
// server decides (a 403 names the role a route needs); the console only
// leaves out what the signed-in role would be refused.
const ROLES = ['viewer', 'sender', 'approver', 'admin'];

// may(role): the signed-in role is role or above it.
export function may(role) {
  return current !== null && ROLES.indexOf(current.role) >= ROLES.indexOf(role);
}

// app.js registers what a 401 does (go to sign-in); kept as a callback so
// this module does not depend on the router.
export function onUnauthorized(fn) {
  unauthorized = fn;
}

const SAFE = new Set(['GET', 'HEAD']);

// api('POST', '/push/broadcast?wait=0', body, {signal}) → the parsed JSON
// (null for 204), or throws ApiError / the AbortError of a canceled call.
// opts.handle401 = false lets the caller deal with a 401 itself (sign-in,
// the session check at boot).
export async function api(method, path, body, opts = {}) {
  const headers = {Accept: 'application/json'};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (!SAFE.has(method) && current?.csrf_token) headers['X-CSRF-Token'] = current.csrf_token;

  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: opts.signal,
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network_error', t('api.unreachable'));
  }

  // Reading the body may also be aborted; that AbortError goes up as is.
  const text = res.status === 204 ? '' : await res.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = undefined; // not JSON: a proxy's error page, say
    }
  }

  if (!res.ok) {
    const detail = (data && data.error) || {};
    let message = detail.message || t('api.status', {status: `${res.status}${res.statusText ? ' ' + res.statusText : ''}`});
    const retryAfter = res.headers.get('Retry-After');
    if (res.status === 429 && retryAfter && !/retry|again/i.test(message)) {
      message += ' ' + t('api.retryAfter', {seconds: retryAfter});
    }
    const err = new ApiError(res.status, detail.code || `http_${res.status}`, message, detail.field, retryAfter);
    if (res.status === 401 && opts.handle401 !== false) unauthorized(err);
    // A sign-in in another tab replaced the session (and its CSRF token):
    // take the new one and try once more.
    if (err.code === 'csrf_failed' && !opts.retried && path !== '/console/api/session') {
      const s = await api('GET', '/console/api/session', undefined, {handle401: false, signal: opts.signal});
      if (s && s.signed_in && s.csrf_token !== current?.csrf_token) {
        setSession(s);
        return api(method, path, body, {...opts, retried: true});
      }
    }
    throw err;
  }
  if (data === undefined) {
    throw new ApiError(res.status, 'bad_response', t('api.notJSON'));
  }
  // opts.headers: the caller reads a header too (Idempotent-Replayed).
  return opts.headers ? {body: data, headers: res.headers} : data;
}

export const get = (path, opts) => api('GET', path, undefined, opts);
export const post = (path, body, opts) => api('POST', path, body === undefined ? {} : body, opts);
export const del = (path, opts) => api('DELETE', path, undefined, opts);

// Query strings from an object, dropping empty values.
export function qs(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v != null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? '?' + s : '';
}
