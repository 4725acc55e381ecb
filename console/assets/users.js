// Look up a user (#/users, #/users?id=42): "did user 42 get Tuesday's
// push?". The user's recent broadcasts, newest first, with each of their
// devices' kept outcome (accepted, failed with its code, capped,
// canceled), opened and clicked, from GET /push/users/{id}/deliveries; a
// "More" button pages on (next_after). Outcomes are kept for
// PUSHFAN_OUTCOME_RETENTION (30 days by default).

import {get} from './api.js';
import {h, table, emptyRow, field, fill, add, isQuiet, showPageError} from './dom.js';
import {timeEl} from './format.js';
import {createFieldErrors, inputTarget} from './fielderrors.js';

export async function render(ctx) {
  const {root, signal, query} = ctx;
  add(root, h('h1', {tabindex: '-1'}, 'Look up a user'),
    h('p', {class: 'hint'}, 'A user\'s recent broadcasts and what became of each of their devices: accepted by FCM, failed (with its code), capped or canceled; opened and clicked when the app reports it. Kept for PUSHFAN_OUTCOME_RETENTION.'));
  const input = h('input', {id: 'user-id', type: 'text', inputmode: 'numeric', required: true, autocomplete: 'off', spellcheck: 'false', value: query?.get('id') || ''});
  const formError = h('div', {id: 'user-form-error', class: 'alert', role: 'alert', tabindex: '-1', hidden: true});
  const submit = h('button', {type: 'submit', id: 'user-lookup', class: 'btn btn-primary'}, 'Look up');
  const form = h('form', {id: 'user-form', novalidate: true}, field('User id', input, 'The id of the user in your users table.'), formError, h('div', {class: 'actions'}, submit));
  const results = h('section', {id: 'user-deliveries', class: 'card', 'aria-live': 'polite'});
  add(root, form, results);
  const errors = createFieldErrors(form, formError, (path) => (path === 'id' ? inputTarget(input) : null));

  async function lookup(after) {
    errors.clearAll();
    const id = input.value.trim();
    if (!/^[1-9]\d*$/.test(id)) {
      errors.show('id', 'A user id is a positive integer.');
      errors.focusFirst();
      return;
    }
    submit.disabled = true;
    try {
      const q = new URLSearchParams({limit: '20'});
      if (after) q.set('after', String(after));
      const page = await get(`/push/users/${id}/deliveries?${q}`, {signal});
      show(page, Boolean(after));
    } catch (err) {
      if (isQuiet(err)) return;
      if (err.field) {
        errors.showApi(err);
        errors.focusFirst();
      } else {
        showPageError(root, err);
      }
    } finally {
      submit.disabled = false;
    }
  }

  let rows = [];
  function show(page, more) {
    if (!more) rows = [];
    rows = rows.concat(page.deliveries || []);
    const body = rows.length ? rows.flatMap(deliveryRows) : [emptyRow(6, 'No broadcast with an outcome kept for this user.')];
    const next = page.next_after ? h('button', {type: 'button', id: 'user-more', class: 'btn', on: {click: () => lookup(page.next_after)}}, 'More') : null;
    fill(results, h('h2', null, `User ${page.user_id}`),
      table({id: 'user-deliveries-table'}, ['Broadcast', 'When', 'Device', 'Outcome', 'Opened', 'Clicked'], body), next);
  }

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    lookup(0);
  });
  if (input.value) await lookup(0);
}

// deliveryRows is one broadcast's rows: one per device.
function deliveryRows(d) {
  return d.devices.map((dv, i) => h('tr', {'data-broadcast': d.broadcast_id, 'data-token': dv.token_id},
    i === 0 ? h('td', {rowspan: d.devices.length}, h('a', {href: `#/broadcasts/${d.broadcast_id}`}, `#${d.broadcast_id} ${d.title || ''}`),
      d.category ? h('span', {class: 'hint'}, ' ' + d.category) : null) : null,
    i === 0 ? h('td', {rowspan: d.devices.length}, timeEl(d.at)) : null,
    h('td', null, `${dv.platform || 'device'} #${dv.token_id}`),
    h('td', {class: ['outcome', 'outcome-' + dv.outcome]}, dv.outcome + (dv.code ? ` (${dv.code})` : ''),
      dv.resend_id ? h('span', {class: 'hint'}, ` by resend #${dv.resend_id}`) : null),
    h('td', null, dv.opened_at ? timeEl(dv.opened_at) : '–'),
    h('td', null, dv.clicked_at ? timeEl(dv.clicked_at) : '–')));
}
