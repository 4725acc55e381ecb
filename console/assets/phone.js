// The phone-style rendering of a notification, as a lock screen shows it.
// It is a guide to length and tone, not a pixel copy of any one OS.

import {h} from './dom.js';
import {clock} from './format.js';

export const APP_NAME = 'pushfan demo';

// Builds the phone once; update() redraws the notification in place.
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
  function update({title: t = '', body: b = '', image = ''}) {
    title.textContent = t;
    body.textContent = b;
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

export function loadableImage(url) {
  try {
    const u = new URL(String(url).trim());
    return (u.protocol === 'https:' || u.protocol === 'http:') && u.hostname ? u.href : '';
  } catch {
    return '';
  }
}
