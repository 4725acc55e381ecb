// The top of a broadcast's page before it starts: when it goes (in the
// viewer's zone and in UTC, and how long until then), and, for a sender,
// an Edit form of its message and time (PATCH /push/broadcasts/{id}) while
// it is scheduled or held and not released. watch.js places the card and
// feeds it every state it gets; the card hides itself once the broadcast
// has started.

import {api, may} from './api.js';
import {h, fill, add, isQuiet, field} from './dom.js';
import {localInputToRFC3339, isoToLocalInput} from './format.js';
import {createFieldErrors, inputTarget} from './fielderrors.js';
import {t, locale} from './i18n.js';

const UNSTARTED = new Set(['scheduled', 'held']);
// The cards of results (the rate, engagement, error codes, failures): a
// broadcast that has not run has none, and they say nothing until it has.
const RESULT_CARDS = ['rate-h', 'engagement-h', 'codes-h', 'failures-h'];

// "in 3 h 20 min", "in 2 d 4 h", "in 5 min", "in less than a minute".
export function untilText(ms) {
  if (ms < 60_000) return t('watch.when.soon');
  const mins = Math.floor(ms / 60_000);
  const days = Math.floor(mins / 1440);
  const hours = Math.floor((mins % 1440) / 60);
  const minutes = mins % 60;
  if (days) return t('watch.when.inDays', {days, hours});
  if (hours) return t('watch.when.inHours', {hours, minutes});
  return t('watch.when.inMinutes', {minutes});
}

function whenText(d) {
  const local = new Intl.DateTimeFormat(locale(), {dateStyle: 'full', timeStyle: 'short'}).format(d);
  const utc = new Intl.DateTimeFormat(locale(), {dateStyle: 'medium', timeStyle: 'short', timeZone: 'UTC'}).format(d);
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || '';
  return {local, utc, zone};
}

// scheduleCard(ctx, base, update): {el, update(b)}; update(b) is called
// with each state, and onSaved with the edited broadcast.
export function scheduleCard(ctx, base, onSaved) {
  const el = h('section', {id: 'schedule-card', class: 'card', 'aria-labelledby': 'schedule-h', hidden: true});
  const st = {b: null, editing: false, key: ''};

  function update(b) {
    st.b = b;
    const show = UNSTARTED.has(b.status);
    el.hidden = !show;
    for (const id of RESULT_CARDS) {
      const card = el.parentElement?.querySelector(`section[aria-labelledby="${id}"]`);
      if (card) card.hidden = show;
    }
    if (!show) {
      st.editing = false;
      return;
    }
    const key = JSON.stringify([b.status, b.send_at, b.starts_at, b.released_at, b.message, st.editing, Math.floor(Date.now() / 30_000)]);
    if (key === st.key) return;
    st.key = key;
    if (!st.editing) fill(el, ...view(b));
  }

  function view(b) {
    const at = b.starts_at || b.send_at;
    const kids = [h('h2', {id: 'schedule-h'}, t('watch.when.title'))];
    if (at) {
      const d = new Date(at);
      const w = whenText(d);
      kids.push(h('p', {id: 'schedule-when', class: 'lede'},
        h('time', {datetime: d.toISOString()}, w.local), ' ',
        h('span', {class: 'muted'}, t('watch.when.zone', {zone: w.zone})), ' · ',
        h('strong', {id: 'schedule-until'}, untilText(d.getTime() - Date.now()))));
      kids.push(h('p', {id: 'schedule-utc', class: 'muted'}, t('watch.when.utc', {time: w.utc})));
    }
    if (b.status === 'held') {
      kids.push(h('p', {class: 'muted'}, at ? t('watch.when.heldAt') : t('watch.when.heldNow')));
    }
    const editable = may('sender') && !b.released_at;
    if (editable) {
      kids.push(h('div', {class: 'actions'},
        h('button', {type: 'button', id: 'btn-edit', class: 'btn', on: {click: () => {
          st.editing = true;
          fill(el, ...form(b));
          el.querySelector('input')?.focus();
        }}}, t('watch.edit.open'))));
    } else if (b.released_at) {
      kids.push(h('p', {class: 'hint'}, t('watch.edit.released')));
    }
    return kids;
  }

  function form(b) {
    const m = b.message || {};
    const title = h('input', {id: 'edit-title', type: 'text', value: m.title || ''});
    const body = h('textarea', {id: 'edit-body', rows: 3}, m.body || '');
    const at = b.send_at || b.starts_at;
    const sendAt = h('input', {id: 'edit-send-at', type: 'datetime-local', step: 1, value: at ? isoToLocalInput(at) : ''});
    const formError = h('div', {class: 'alert', role: 'alert', tabindex: '-1', hidden: true});
    const fields = {title, body, send_at: sendAt};
    const errors = createFieldErrors(el, formError, (path) => inputTarget(fields[path]));
    const save = h('button', {type: 'submit', id: 'btn-edit-save', class: ['btn', 'btn-primary']}, t('watch.edit.save'));
    const cancel = h('button', {type: 'button', id: 'btn-edit-cancel', class: 'btn', on: {click: () => {
      st.editing = false;
      st.key = '';
      update(st.b);
    }}}, t('watch.edit.cancel'));
    const f = h('form', {id: 'edit-form', on: {submit: async (ev) => {
      ev.preventDefault();
      errors.clearAll();
      const edit = {title: title.value, body: body.value};
      if (m.image) edit.image = m.image;
      if (m.data) edit.data = m.data;
      if (m.link_data_key) edit.link_data_key = m.link_data_key;
      if (sendAt.value) {
        const rfc = localInputToRFC3339(sendAt.value);
        if (!rfc) {
          errors.show('send_at', t('watch.edit.badTime'));
          errors.focusFirst();
          return;
        }
        edit.send_at = rfc;
      }
      save.disabled = true;
      try {
        const saved = await api('PATCH', base, edit, {signal: ctx.signal});
        st.editing = false;
        st.key = '';
        update(saved);
        onSaved(saved);
      } catch (err) {
        if (isQuiet(err)) return;
        errors.showApi(err);
        errors.focusFirst();
      } finally {
        if (save.isConnected) save.disabled = false;
      }
    }}},
    field(t('watch.edit.title'), title),
    field(t('watch.edit.body'), body),
    field(t('watch.edit.sendAt'), sendAt, t('watch.edit.sendAtHint')),
    formError,
    h('div', {class: 'actions'}, save, cancel));
    return [h('h2', {id: 'schedule-h'}, t('watch.edit.heading')), f];
  }

  // The countdown moves on even when no new state arrives.
  const timer = setInterval(() => st.b && update(st.b), 30_000);
  ctx.cleanup(() => clearInterval(timer));
  return {el, update};
}

