// Activity (#/activity, admins): the audit trail, newest first, filtered
// by actor, action and target, paged by the API's keyset cursor (next
// goes back as after). Each change anyone made through the API is one
// row, written in the change's own transaction (docs/audit.md).

import {get, qs} from './api.js';
import {h, table, emptyRow, showPageError, clearPageError, field, fill, add} from './dom.js';
import {timeEl} from './format.js';
import {t} from './i18n.js';
import {enumEl, enumName, ACTIONS} from './enums.js';

const PAGE = 50;

export async function render(ctx) {
  const {root, signal} = ctx;
  add(root, h('h1', {tabindex: '-1'}, t('nav.activity')));
  const input = (id, placeholder) => h('input', {id, type: 'search', placeholder, autocomplete: 'off', maxlength: 255});
  const actor = input('activity-actor', t('activity.actorPlaceholder'));
  // The actions in words; the API filters by the exact action.
  const action = h('select', {id: 'activity-action'}, h('option', {value: ''}, t('activity.anyAction')),
    ACTIONS.map((a) => h('option', {value: a}, enumName('action', a))));
  const target = input('activity-target', 'broadcast:42');
  const list = h('div');
  // The cursors of the pages before this one, to go back (the API pages
  // older only).
  const pager = {after: '', next: null, back: []};
  const older = h('button', {type: 'button', id: 'activity-older', class: 'btn', disabled: true,
    on: {click: () => { pager.back.push(pager.after); pager.after = pager.next; refresh(); }}}, t('common.older'));
  const newer = h('button', {type: 'button', id: 'activity-newer', class: 'btn', disabled: true,
    on: {click: () => { pager.after = pager.back.pop() || ''; refresh(); }}}, t('common.newer'));
  const form = h('form', {id: 'activity-filters', class: 'filters', on: {submit: (ev) => {
    ev.preventDefault();
    pager.after = '';
    pager.back = [];
    refresh();
  }}},
  field(t('activity.col.actor'), actor), field(t('activity.col.action'), action), field(t('activity.col.target'), target),
  h('button', {type: 'submit', class: 'btn btn-primary'}, t('activity.filter')));
  add(root,
    h('section', {class: 'card', 'aria-labelledby': 'activity-h'},
      h('h2', {id: 'activity-h'}, t('activity.trail')),
      h('p', {class: 'hint'}, t('activity.hint'), ' ', h('code', null, 'PUSHFAN_AUDIT_RETENTION'), t('activity.hintEnd')),
      form, list, h('div', {class: 'pager'}, newer, older)));

  function draw(page) {
    pager.next = page.next || null;
    older.disabled = !pager.next;
    newer.disabled = pager.back.length === 0 && !pager.after;
    const heads = [t('activity.col.when'), t('activity.col.actor'), t('activity.col.action'), t('activity.col.target'), t('activity.col.from'), t('activity.col.request')];
    const rows = (page.entries || []).map((e) => h('tr', {'data-entry': e.id, 'data-action': e.action},
      h('td', null, timeEl(e.at)),
      h('td', {class: 'actor'}, h('span', {'data-raw': ''}, e.actor.name || e.actor.id), ' ', h('span', {class: 'muted', 'data-kind': e.actor.kind}, actorKind(e.actor.kind))),
      h('td', null, enumEl('action', e.action, {class: 'action'})),
      h('td', {class: 'target'}, targetLink(e.target)),
      h('td', null, h('code', null, e.ip)),
      h('td', null, h('code', {class: 'muted'}, e.request_id))));
    fill(list, table({id: 'activity-table'}, heads, rows.length ? rows : emptyRow(heads.length, t('activity.none'))));
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
function targetLink(target) {
  if (!target) return '—';
  const [kind, id] = [target.slice(0, target.indexOf(':')), target.slice(target.indexOf(':') + 1)];
  if (kind === 'broadcast') return h('a', {href: '#/broadcasts/' + encodeURIComponent(id), 'data-raw': ''}, target);
  if (kind === 'segment') return h('a', {href: '#/segments/' + encodeURIComponent(id), 'data-raw': ''}, target);
  if (kind === 'webhook') return h('a', {href: '#/webhooks/' + encodeURIComponent(id), 'data-raw': ''}, target);
  return h('span', {'data-raw': ''}, target);
}

// Who acted, in words: a token from the environment, an API key, a person
// signed in through the provider; another kind as the server wrote it.
function actorKind(kind) {
  return ['token', 'key', 'person'].includes(kind) ? t(`activity.kind.${kind}`) : kind;
}
