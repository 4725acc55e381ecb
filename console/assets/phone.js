// The phone-style rendering of a notification, as a lock screen shows it.
// It is a guide to length and tone, not a pixel copy of any one OS.

import {h, fill} from './dom.js';
import {clock} from './format.js';

export const APP_NAME = 'pushfan demo';

// Builds the phone once; update() redraws the notification in place. A
// message category's labels (prefix, suffix) are drawn on it as the
// server adds them to every title and body (broadcast/rules/category.go),
// so the phone shows the message exactly as sent: a suffix's newline is a
// line break (.phone-body keeps white space).
export function createPhone() {
  const title = h('p', {class: 'phone-title'});
  const body = h('p', {class: 'phone-body'});
  const img = h('img', {class: 'phone-image', alt: '', hidden: true, referrerpolicy: 'no-referrer'});
  const imgNote = h('p', {class: 'phone-image-note', hidden: true}, 'The image did not load.');
  img.addEventListener('error', () => {
    img.hidden = true;
    imgNote.hidden = !img.getAttribute('src');
  });
  img.addEventListener('load', () => {
    img.hidden = false;
    imgNote.hidden = true;
  });
  const time = h('span', {class: 'phone-clock'}, clock(new Date()));

  const el = h('div', {id: 'phone-preview', class: 'phone', role: 'img', 'aria-label': 'Notification preview'},
    h('div', {class: 'phone-status'}, time),
    h('div', {class: 'phone-notif'},
      h('div', {class: 'phone-head'},
        h('span', {class: 'phone-icon', 'aria-hidden': 'true'}, 'P'),
        h('span', {class: 'phone-app'}, APP_NAME),
        h('span', {class: 'phone-when'}, 'now')),
      title, body, img, imgNote));

  let lastSrc = '';
  function update({title: rawTitle = '', body: rawBody = '', image = '', prefix = '', suffix = ''}) {
    const t = labeledTitle(rawTitle, prefix);
    const b = labeledBody(rawBody, suffix);
    fill(title, ...labeled(rawTitle, prefix, t, true));
    fill(body, ...labeled(rawBody, suffix, b, false));
    el.setAttribute('aria-label', `Notification preview: ${APP_NAME}. ${t} ${b}`.trim());
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

// The label's part is its own span (.phone-label), so that the operator
// sees what the category adds; the text is the same either way.
function labeled(raw, label, full, before) {
  if (!full) return [];
  if (full === raw) return [full];
  const mark = h('span', {class: 'phone-label'}, label);
  return before ? [mark, raw] : [raw, mark];
}

// labeledTitle is title with the category's prefix before it, and
// labeledBody body with its suffix after it, as the server adds them: not
// twice when the text already has it (a duplicated broadcast's message is
// stored as sent), and on an empty text too (the label is always there).
export function labeledTitle(title, prefix) {
  return !prefix || title.startsWith(prefix) ? title : prefix + title;
}

export function labeledBody(body, suffix) {
  return !suffix || body.endsWith(suffix) ? body : body + suffix;
}

export function loadableImage(url) {
  try {
    const u = new URL(String(url).trim());
    return (u.protocol === 'https:' || u.protocol === 'http:') && u.hostname ? u.href : '';
  } catch {
    return '';
  }
}
