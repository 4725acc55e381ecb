// The phone-style rendering of a notification, as a lock screen shows it.
// It is a guide to length and tone, not a pixel copy of any one OS.

import {h, fill} from './dom.js';
import {clock} from './format.js';
import {t} from './i18n.js';

export const APP_NAME = 'pushfan demo';

// Builds the phone once (id: its element's id; the review's phone has
// none, so that #phone-preview stays the form's); update() redraws the notification in place. A
// message category's labels (prefix, suffix) are drawn on it as the
// server adds them (labeledMessage), so the phone shows the message
// exactly as sent: a suffix's newline is a line break (.phone-body keeps
// white space).
export function createPhone(id) {
  const title = h('p', {class: 'phone-title'});
  const body = h('p', {class: 'phone-body'});
  const img = h('img', {class: 'phone-image', alt: '', hidden: true, referrerpolicy: 'no-referrer'});
  const imgNote = h('p', {class: 'phone-image-note', hidden: true}, t('compose.phone.noImage'));
  img.addEventListener('error', () => {
    img.hidden = true;
    imgNote.hidden = !img.getAttribute('src');
  });
  img.addEventListener('load', () => {
    img.hidden = false;
    imgNote.hidden = true;
  });
  const time = h('span', {class: 'phone-clock'}, clock(new Date()));

  const el = h('div', {class: 'phone', role: 'img', 'aria-label': t('compose.phone.label')},
    h('div', {class: 'phone-status'}, time),
    h('div', {class: 'phone-notif'},
      h('div', {class: 'phone-head'},
        h('span', {class: 'phone-icon', 'aria-hidden': 'true'}, 'P'),
        h('span', {class: 'phone-app'}, APP_NAME),
        h('span', {class: 'phone-when'}, t('compose.phone.now'))),
      title, body, img, imgNote));

  if (id) el.id = id;
  let lastSrc = '';
  function update({title: rawTitle = '', body: rawBody = '', image = '', prefix = '', suffix = ''}) {
    const m = labeledMessage(rawTitle, rawBody, prefix, suffix);
    // The label's parts are spans of their own (.phone-label), so that the
    // operator sees what the category adds; the text is the same.
    const draw = (parts) => parts.map(([text, label]) => (label ? h('span', {class: 'phone-label'}, text) : text));
    fill(title, ...draw(m.title));
    fill(body, ...draw(m.body));
    const ti = m.title.map(([x]) => x).join('');
    const b = m.body.map(([x]) => x).join('');
    el.setAttribute('aria-label', t('compose.phone.labelWith', {app: APP_NAME, text: `${ti} ${b}`.trim()}));
    time.textContent = clock(new Date());
    // Only a whole http(s) URL is loaded: a half-typed one would be a
    // request for a path on this server (and a 404 in the console).
    const src = loadableImage(image);
    if (src === lastSrc) return;
    lastSrc = src;
    imgNote.hidden = true;
    if (src) img.src = src;
    else {
      img.removeAttribute('src');
      img.hidden = true;
    }
  }
  return {el, update};
}

// labeledMessage is a title and body with a category's labels, as the
// server adds them (broadcast/rules/category.go, labeled): the prefix
// starts what the phone shows (the title, or the body of a message
// without one, its leading spaces dropped), the suffix ends the body (or
// is the body, its leading line breaks dropped, of a message without
// one); a label already there is not added twice (a duplicated
// broadcast's message is stored as sent). A message with neither is left
// so (the server refuses it). The answer is each text's parts, [text,
// isLabel], in order.
export function labeledMessage(title, body, prefix = '', suffix = '') {
  if (title === '' && body === '') return {title: [], body: []};
  const lit = (l) => `{{${JSON.stringify(l)}}}`;
  const t = title === '' ? [] : [[title, false]];
  const b = body === '' ? [] : [[body, false]];
  const front = title !== '' ? {parts: t, text: title, p: prefix} : {parts: b, text: body, p: prefix.replace(/^ +/, '')};
  const bare = front.p.trim();
  if (bare && !front.text.startsWith(bare) && !front.text.startsWith(lit(front.p))) front.parts.unshift([front.p, true]);
  const tail = suffix.replace(/^[\n\r\t ]+/, '');
  if (tail && !body.endsWith(tail) && !body.endsWith(lit(suffix))) b.push(body === '' ? [tail, true] : [suffix, true]);
  return {title: t, body: b};
}

export function loadableImage(url) {
  try {
    const u = new URL(String(url).trim());
    return (u.protocol === 'https:' || u.protocol === 'http:') && u.hostname ? u.href : '';
  } catch {
    return '';
  }
}
