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
import {t} from './i18n.js';
import {enumName} from './enums.js';

export async function render(ctx) {
  const {root, signal, query} = ctx;
  add(root, h('h1', {tabindex: '-1'}, t('app.title.users')),
    h('p', {class: 'hint'}, t('users.intro'), ' ', h('code', null, 'PUSHFAN_OUTCOME_RETENTION'), t('users.introEnd')));
  const input = h('input', {id: 'user-id', type: 'text', inputmode: 'numeric', required: true, autocomplete: 'off', spellcheck: 'false', value: query?.get('id') || ''});
  const formError = h('div', {id: 'user-form-error', class: 'alert', role: 'alert', tabindex: '-1', hidden: true});
  const submit = h('button', {type: 'submit', id: 'user-lookup', class: 'btn btn-primary'}, t('users.lookup'));
  const form = h('form', {id: 'user-form', novalidate: true}, field(t('users.id'), input, t('users.idHint')), formError, h('div', {class: 'actions'}, submit));
  const results = h('section', {id: 'user-deliveries', class: 'card', 'aria-live': 'polite'});
  add(root, form, results);
  const errors = createFieldErrors(form, formError, (path) => (path === 'id' ? inputTarget(input) : null));

  async function lookup(after) {
    errors.clearAll();
    const id = input.value.trim();
    if (!/^[1-9]\d*$/.test(id)) {
      errors.show('id', t('users.badId'));
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
    const body = rows.length ? rows.flatMap(deliveryRows) : [emptyRow(6, t('users.none'))];
    const next = page.next_after ? h('button', {type: 'button', id: 'user-more', class: 'btn', on: {click: () => lookup(page.next_after)}}, t('users.more')) : null;
    fill(results, h('h2', null, t('users.heading', {id: String(page.user_id)})),
      table({id: 'user-deliveries-table'}, [t('users.col.broadcast'), t('users.col.when'), t('users.col.device'), t('users.col.outcome'),
        t('users.col.opened'), t('users.col.clicked')], body), next);
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
    i === 0 ? h('td', {rowspan: d.devices.length}, h('a', {href: `#/broadcasts/${d.broadcast_id}`, 'data-raw': ''}, `#${d.broadcast_id} ${d.title || ''}`),
      d.category ? h('span', {class: 'hint'}, ' ' + d.category) : null) : null,
    i === 0 ? h('td', {rowspan: d.devices.length}, timeEl(d.at)) : null,
    h('td', null, t('users.device', {platform: dv.platform ? enumName('platform', dv.platform) : t('users.aDevice'), id: String(dv.token_id)})),
    h('td', {class: ['outcome', 'outcome-' + dv.outcome], 'data-outcome': dv.outcome}, enumName('outcome', dv.outcome), dv.code ? [' (', h('code', null, dv.code), ')'] : '',
      dv.resend_id ? h('span', {class: 'hint'}, ' ', t('users.byResend', {id: String(dv.resend_id)})) : null),
    h('td', null, dv.opened_at ? timeEl(dv.opened_at) : '–'),
    h('td', null, dv.clicked_at ? timeEl(dv.clicked_at) : '–')));
}
