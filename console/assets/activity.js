// Activity (#/activity, admins): the audit trail, newest first, filtered
// by actor, action and target, paged by the API's keyset cursor (next
// goes back as after). Each change anyone made through the API is one
// row, written in the change's own transaction (docs/audit.md).

import {get, qs} from './api.js';
import {h, table, emptyRow, showPageError, clearPageError, field, fill, add} from './dom.js';
import {timeEl} from './format.js';

const PAGE = 50;

export async function render(ctx) {
  const {root, signal} = ctx;
  add(root, h('h1', {tabindex: '-1'}, 'Activity'));
  const input = (id, placeholder) => h('input', {id, type: 'search', placeholder, autocomplete: 'off', maxlength: 255});
  const actor = input('activity-actor', 'alice, or a person\u2019s email');
  const action = input('activity-action', 'broadcast.cancel');
  const target = input('activity-target', 'broadcast:42');
  const list = h('div');
  // The cursors of the pages before this one, to go back (the API pages
  // older only).
  const pager = {after: '', next: null, back: []};
  const older = h('button', {type: 'button', id: 'activity-older', class: 'btn', disabled: true,
    on: {click: () => { pager.back.push(pager.after); pager.after = pager.next; refresh(); }}}, 'Older');
  const newer = h('button', {type: 'button', id: 'activity-newer', class: 'btn', disabled: true,
    on: {click: () => { pager.after = pager.back.pop() || ''; refresh(); }}}, 'Newer');
  const form = h('form', {id: 'activity-filters', class: 'filters', on: {submit: (ev) => {
    ev.preventDefault();
    pager.after = '';
    pager.back = [];
    refresh();
  }}},
  field('Actor', actor), field('Action', action), field('Target', target),
  h('button', {type: 'submit', class: 'btn btn-primary'}, 'Filter'));
  add(root,
    h('section', {class: 'card', 'aria-labelledby': 'activity-h'},
      h('h2', {id: 'activity-h'}, 'Audit trail'),
      h('p', {class: 'hint'}, 'Every change made through the API: who, what, to what, from where. Entries are never changed or deleted, only aged out after PUSHFAN_AUDIT_RETENTION.'),
      form, list, h('div', {class: 'pager'}, newer, older)));

  function draw(page) {
    pager.next = page.next || null;
    older.disabled = !pager.next;
    newer.disabled = pager.back.length === 0 && !pager.after;
    const heads = ['When', 'Actor', 'Action', 'Target', 'From', 'Request'];
    const rows = (page.entries || []).map((e) => h('tr', {'data-entry': e.id, 'data-action': e.action},
      h('td', null, timeEl(e.at)),
      h('td', {class: 'actor'}, e.actor.name || e.actor.id, ' ', h('span', {class: 'muted'}, e.actor.kind)),
      h('td', null, h('code', {class: 'action'}, e.action)),
      h('td', {class: 'target'}, targetLink(e.target)),
      h('td', null, h('code', null, e.ip)),
      h('td', null, h('code', {class: 'muted'}, e.request_id))));
    fill(list, table({id: 'activity-table'}, heads, rows.length ? rows : emptyRow(heads.length, 'Nothing recorded matches.')));
  }

  let seq = 0; // a slower, older answer must not overwrite a newer one
  async function refresh() {
    const mine = ++seq;
    try {
      const page = await get('/push/audit' + qs({actor: actor.value.trim(), action: action.value.trim(),
        target: target.value.trim(), after: pager.after, limit: PAGE}), {signal});
      if (mine !== seq) return;
      draw(page);
      clearPageError();
    } catch (err) {
      if (signal.aborted || err.status === 401) return;
      showPageError(root, err);
    }
  }
  await refresh();
}

// targetLink links a broadcast's or a segment's target to its page.
function targetLink(t) {
  if (!t) return '—';
  const [kind, id] = [t.slice(0, t.indexOf(':')), t.slice(t.indexOf(':') + 1)];
  if (kind === 'broadcast') return h('a', {href: '#/broadcasts/' + encodeURIComponent(id)}, t);
  if (kind === 'segment') return h('a', {href: '#/segments/' + encodeURIComponent(id)}, t);
  if (kind === 'webhook') return h('a', {href: '#/webhooks/' + encodeURIComponent(id)}, t);
  return t;
}
