// The review before a send: a modal that says who gets the broadcast (users
// and devices), in which category and who it leaves out, when it goes,
// the message as a phone shows it, and the warnings; a large audience is
// confirmed by typing its device count or the word SEND.

import {h, fill} from './dom.js';
import {t, lang} from './i18n.js';
import {createPhone} from './phone.js';

// CONFIRM_AT is the device count from which a send is confirmed by typing:
// past it a mistake reaches too many people to be undone by an apology.
export const CONFIRM_AT = 1000;

// The words that confirm a large send: SEND, and the word the console
// shows in the chosen language (Korean: 보내기).
function confirmWords() {
  const words = ['SEND'];
  if (lang() !== 'en') words.push(t('compose.review.word'));
  return words;
}

// confirms is whether typed confirms a send to devices: the count (with
// or without separators) or one of the words, in any case.
export function confirms(typed, devices) {
  const s = String(typed).trim();
  if (!s) return false;
  if (devices != null && s.replace(/[\s,.'’]/g, '') === String(devices)) return true;
  return confirmWords().some((w) => s.toLowerCase() === w.toLowerCase());
}

// openReview shows the review and resolves true when the operator
// confirms, false when they go back (Escape, the Back button).
// r: {audience: text, users, devices, category, excluded, capped, night,
// when: [lines], message: {title, body, image, prefix, suffix}, warnings}.
// devices null: the count could not be had (r.countError says why); the
// send is confirmed by typing the word, as a large one.
export function openReview(host, r) {
  const dlg = h('dialog', {id: 'review', class: 'review', 'aria-labelledby': 'review-title'});
  const big = r.devices == null || r.devices >= CONFIRM_AT;
  const confirm = h('button', {id: 'review-confirm', type: 'button', class: 'btn btn-primary', disabled: big}, r.button);
  const back = h('button', {id: 'review-back', type: 'button', class: 'btn'}, t('compose.review.back'));
  const typed = h('input', {id: 'review-type', type: 'text', autocomplete: 'off', spellcheck: 'false'});
  const phone = createPhone('review-phone');
  phone.update(r.message);
  const line = (id, text) => (text ? h('p', {id}, text) : null);
  fill(dlg,
    h('h2', {id: 'review-title'}, t('compose.review.title')),
    h('div', {class: 'review-grid'},
      h('div', null,
        h('h3', null, t('compose.review.who')),
        h('p', {id: 'review-audience', 'data-users': String(r.users ?? ''), 'data-devices': String(r.devices)},
          h('strong', null, r.devices == null ? t('compose.review.uncounted')
            : r.users == null
              ? t('compose.review.devices', {count: r.devices})
              : t('compose.review.usersDevices', {users: r.users, count: r.devices})),
          ' · ', r.audience),
        r.devices == null ? h('p', {id: 'review-uncounted', class: 'alert alert-warn'}, t('compose.review.uncountedWhy'),
          h('details', null, h('summary', null, t('common.details')), h('span', {'data-raw': ''}, r.countError || ''))) : null,
        line('review-category', r.category ? t('compose.review.category', {category: r.category}) : ''),
        line('review-excluded', r.excluded ? t('compose.review.excluded', {count: r.excluded}) : ''),
        line('review-capped', r.capped ? t('compose.review.capped', {count: r.capped}) : ''),
        line('review-night', r.night || ''),
        h('h3', null, t('compose.review.when')),
        h('ul', {id: 'review-when', class: 'plain'}, r.when.map((w) => h('li', null, w))),
        r.warnings.length
          ? h('div', {id: 'review-warnings', class: 'alert alert-warn'},
            h('p', null, t('compose.review.warnings')),
            h('ul', null, r.warnings.map((w) => h('li', {'data-warning': w.id}, w.text))))
          : null),
      h('div', null, h('h3', null, t('compose.review.looks')), phone.el)),
    big ? h('div', {class: 'field review-type'},
      h('label', {for: typed.id}, r.devices == null
        ? t('compose.review.typeWord', {word: confirmWords().join(' / ')})
        : t('compose.review.type', {count: r.devices, word: confirmWords().join(' / ')})),
      typed) : null,
    h('div', {class: 'dialog-actions'}, back, confirm));
  host.append(dlg);
  return new Promise((resolve) => {
    let done = false;
    const finish = (yes) => {
      if (done) return;
      done = true;
      if (dlg.open) dlg.close();
      dlg.remove();
      resolve(yes);
    };
    typed.addEventListener('input', () => {
      confirm.disabled = !confirms(typed.value, r.devices);
    });
    typed.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && !confirm.disabled) finish(true);
    });
    confirm.addEventListener('click', () => finish(true));
    back.addEventListener('click', () => finish(false));
    dlg.addEventListener('close', () => finish(false));
    dlg.showModal();
    (big ? typed : back).focus();
  });
}

// whenLines says when a broadcast request goes, in the operator's words.
export function whenLines(req, fmtTime) {
  const out = [];
  if (req.send_at) out.push(t('compose.when.at', {time: fmtTime(req.send_at)}));
  else if (req.send_at_local) out.push(t('compose.when.local', {time: req.send_at_local.replace('T', ' ').slice(0, 16)}));
  else out.push(t('compose.when.now'));
  if (req.quiet_hours) out.push(t('compose.when.quiet', {start: req.quiet_hours.start, end: req.quiet_hours.end}));
  if (req.max_rate) out.push(t('compose.when.rate', {rate: req.max_rate}));
  if (req.deliver_over) out.push(t('compose.when.over', {over: req.deliver_over}));
  return out;
}
