// The checks compose makes before a send: warnings that do not block (a
// missing title, a body longer than a phone shows, a link that does not
// lead to this deployment's public host), and the operator's words for
// the errors the API names by field and code.

import {h} from './dom.js';
import {t} from './i18n.js';

// BODY_SHOWN is the body length a phone shows before cutting it: Android's
// expanded notification shows about 178 characters, an iOS lock screen
// about 110 (4 lines). We warn past the larger, Android's: past it no
// phone shows the whole body; the warning names the iOS figure too.
export const BODY_SHOWN = 178;
export const BODY_SHOWN_IOS = 110;

// warnings is the list of {id, text} the message m (as the form reads it)
// earns; publicURL is PUSHFAN_PUBLIC_URL ('' when unset: links are not
// checked, there is no host to compare with).
export function warnings(m, publicURL) {
  const out = [];
  if (!m.title?.trim()) out.push({id: 'no-title', text: t('compose.warn.noTitle')});
  const len = [...(m.body || '')].length;
  if (len > BODY_SHOWN) {
    out.push({id: 'long-body', text: t('compose.warn.longBody', {count: len, android: BODY_SHOWN, ios: BODY_SHOWN_IOS})});
  }
  const host = hostOf(publicURL);
  if (host) {
    for (const link of linksOf(m)) {
      const lh = hostOf(link);
      if (lh !== host) out.push({id: 'link-host', text: t('compose.warn.linkHost', {link, host})});
    }
  }
  return out;
}

// The links a message carries: data values and the web push link that
// are whole http(s) URLs (a templated one, {{…}}, is filled per user and
// cannot be checked here).
function linksOf(m) {
  const links = [];
  for (const v of Object.values(m.data || {})) {
    if (/^https?:\/\//i.test(v) && !v.includes('{{')) links.push(v);
  }
  const web = m.webpush?.fcm_options?.link;
  if (typeof web === 'string' && !web.includes('{{')) links.push(web);
  return links;
}

function hostOf(u) {
  try {
    return new URL(u).host.toLowerCase();
  } catch {
    return '';
  }
}

// apiWords is an API error in the operator's words (a node), by its field
// and status, the server's own message behind a "details" toggle.
export function apiWords(err) {
  const field = String(err.field || '');
  const msg = String(err.message || '');
  let words;
  if (err.code === 'send_at_too_far') words = t('compose.err.sendAtTooFar');
  else if (err.code === 'send_at_in_past') words = t('compose.err.sendAtPast');
  else if (field === 'category') words = t('compose.err.category');
  else if (/^(android|apns|webpush|fcm_options)/.test(field)) words = t('compose.err.override');
  else if (field.startsWith('audience')) words = t('compose.err.audience');
  else if (field === 'title' || field === 'body') words = t('compose.err.text');
  else if (field.startsWith('data')) words = t('compose.err.data');
  else if (err.status === 429) words = t('compose.err.tooMany');
  else if (err.status === 0) words = t('compose.err.network');
  else words = t('compose.err.other');
  return withDetails(words, msg);
}

// withDetails is words, with detail (the engineer's text) behind a toggle.
export function withDetails(words, detail) {
  return h('span', {class: 'with-details'}, words,
    detail ? h('details', {class: 'details'}, h('summary', null, t('compose.details')), h('code', {class: 'wrap'}, detail)) : null);
}
