// Tiny DOM builders shared by every page.
//
// Everything is built with createElement and text nodes, never innerHTML:
// text from the API can then never turn into markup (XSS), and nothing
// needs an inline style or handler, which the server's CSP forbids.

import {t} from './i18n.js';

const SVG_NS = 'http://www.w3.org/2000/svg';

// h('a', {href: '#/', class: 'x', on: {click: fn}}, 'text', child, [more])
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  append(el, children);
  // Attributes after children, so that a <select>'s value can pick one of
  // the options just added.
  setAttrs(el, attrs);
  return el;
}

// The same for SVG elements (charts).
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  append(el, children);
  setAttrs(el, attrs);
  return el;
}

// Properties rather than attributes: these reflect the live state.
const PROPS = new Set(['value', 'checked', 'selected', 'indeterminate']);

function setAttrs(el, attrs) {
  if (!attrs) return;
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === 'style') throw new Error('inline styles break the CSP: use a class');
    if (k === 'on') {
      for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    } else if (k === 'class') {
      el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
    } else if (PROPS.has(k)) {
      el[k] = v;
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
}

export function append(el, children) {
  for (const c of children) {
    if (c == null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.append(c);
    else el.append(document.createTextNode(String(c)));
  }
  return el;
}

// A page's lasting message: a load that failed. One per page; replaced,
// not stacked, so a refreshing page does not pile them up.
export function showPageError(root, err) {
  if (isQuiet(err)) return;
  clearPageError();
  const box = h('div', {id: 'page-error', class: 'alert', role: 'alert'}, errorNodes(err));
  root.prepend(box);
}

export function clearPageError() {
  document.getElementById('page-error')?.remove();
}

// Errors that are not the page's to show: an aborted request (the user
// went elsewhere) or a 401 (the app is already on its way to sign-in).
export function isQuiet(err) {
  return err?.name === 'AbortError' || err?.status === 401;
}

export function errorText(err) {
  if (!err) return t('dom.somethingWrong');
  return err.message || String(err);
}

// What a failed call means to the operator, with the server's own words
// and code (engineer's detail) behind a "details" toggle. A refusal the
// operator can act on (a 400 naming a field, a 409) keeps the server's
// message in front: it says what is wrong.
export function errorNodes(err) {
  const status = err?.status;
  if (status == null || status === 0 || !err.code) return errorText(err);
  const detail = [err.message, err.code ? `(${err.code}, HTTP ${status})` : ''].filter(Boolean).join(' ');
  let text = null;
  if (status === 403) text = t('dom.err.forbidden');
  else if (status === 404) text = t('dom.err.notFound');
  else if (status === 429) text = t('dom.err.busy');
  else if (status >= 500) text = t('dom.err.server');
  if (!text) return withDetails(err.message, `${err.code}, HTTP ${status}`, true);
  return withDetails(text, detail);
}

// A page error with the engineer's detail behind a "details" toggle: the
// operator reads what to do, the engineer opens the rest.
// raw marks text as the server's words (not the catalog's).
export function withDetails(text, detail, raw) {
  const main = h('span', {'data-raw': raw ? '' : null}, text);
  if (!detail || detail === text) return main;
  return [main, ' ', h('details', {class: 'details'}, h('summary', null, t('common.details')), h('code', {class: 'detail-text'}, detail))];
}

// A role's badge, in words (the role's code stays in the class).
export function roleTag(role) {
  return h('span', {class: ['role', 'role-' + role], 'data-role': role}, roleName(role));
}

export function roleName(role) {
  return ROLES.includes(role) ? t(`role.${role}`) : role;
}

const ROLES = ['viewer', 'sender', 'approver', 'admin'];

// The statuses of a broadcast a badge names in words; another is shown as
// the server wrote it.
const STATUSES = new Set(['held', 'scheduled', 'planning', 'queued', 'running', 'completed', 'canceled', 'failed', 'paused']);

export function statusName(status) {
  return STATUSES.has(status) ? t(`status.${status}`) : status;
}

// A status badge: the colour comes from the class (see app.css).
export function badge(status, id) {
  return h('span', {class: ['badge', 'badge-' + status], id, 'data-status': status}, statusName(status));
}

// A table in a wrapper that scrolls sideways on a narrow screen.
export function table(attrs, headers, rows) {
  return h('div', {class: 'table-wrap'},
    h('table', attrs,
      h('thead', null, h('tr', null, headers.map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', null, rows)));
}

// One empty-table row spanning every column.
export function emptyRow(cols, text) {
  return h('tr', {class: 'empty'}, h('td', {colspan: cols}, text));
}

// Labelled field: the label names the input by id (label for), an
// optional hint is linked with aria-describedby.
export function field(label, input, hint) {
  const kids = [h('label', {for: input.id}, label), input];
  if (hint) {
    const hintId = input.id + '-hint';
    kids.push(h('p', {class: 'hint', id: hintId}, hint));
    addDescribedBy(input, hintId);
  }
  return h('div', {class: 'field'}, kids);
}

export function addDescribedBy(el, id) {
  const ids = (el.getAttribute('aria-describedby') || '').split(/\s+/).filter(Boolean);
  if (!ids.includes(id)) ids.push(id);
  el.setAttribute('aria-describedby', ids.join(' '));
}

export function removeDescribedBy(el, id) {
  const ids = (el.getAttribute('aria-describedby') || '').split(/\s+/).filter((x) => x && x !== id);
  if (ids.length) el.setAttribute('aria-describedby', ids.join(' '));
  else el.removeAttribute('aria-describedby');
}

// A <dl> from [term, value] pairs, skipping absent values.
export function defList(pairs) {
  const dl = h('dl', {class: 'deflist'});
  for (const [term, value] of pairs) {
    if (value == null || value === '') continue;
    dl.append(h('dt', null, term), h('dd', null, value));
  }
  return dl;
}

// An in-page confirmation on the native <dialog id="confirm"> in
// index.html (never window.confirm): showModal() makes the rest of the page
// inert and keeps focus inside; Escape closes it as "no". Resolves true
// for OK. body is a string or nodes (e.g. the resend code checkboxes).
let settle = null;

export function confirmDialog({title, body, ok = t('dom.confirm.ok')}) {
  const dlg = document.getElementById('confirm');
  const okBtn = document.getElementById('confirm-ok');
  const backBtn = document.getElementById('confirm-cancel');
  closeDialog();
  document.getElementById('confirm-title').textContent = title;
  const bodyEl = document.getElementById('confirm-body');
  bodyEl.replaceChildren();
  append(bodyEl, [typeof body === 'string' ? h('p', null, body) : body]);
  okBtn.textContent = ok;
  const opener = document.activeElement;

  return new Promise((resolve) => {
    const finish = (answer) => {
      okBtn.removeEventListener('click', yes);
      backBtn.removeEventListener('click', no);
      dlg.removeEventListener('close', no);
      settle = null;
      if (dlg.open) dlg.close();
      // Back to the button that opened it, if it is still on the page.
      if (opener && opener.isConnected && typeof opener.focus === 'function') opener.focus();
      resolve(answer);
    };
    const yes = () => finish(true);
    const no = () => finish(false);
    okBtn.addEventListener('click', yes);
    backBtn.addEventListener('click', no);
    dlg.addEventListener('close', no); // Escape, or closeDialog()
    settle = no;
    dlg.showModal();
    // The harmless choice has the focus: Enter alone does not confirm.
    backBtn.focus();
  });
}

// Dismisses an open confirmation (as "no"): the router calls it when the
// page changes under it.
export function closeDialog() {
  if (settle) settle();
}

// Null- and array-safe forms of el.replaceChildren / el.append: the native
// ones turn null into the text "null" and an array into "[object ...]".
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

export function add(el, ...children) {
  return append(el, children);
}
