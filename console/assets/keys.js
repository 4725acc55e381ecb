// API keys (#/keys, admins only): the keys kept in the database, with
// when each was last used; a form that creates one and shows its secret
// once (the server keeps only its hash), with a copy button; and revoke,
// behind a confirmation (a revoked key stops working on every instance
// within 2 s, and cannot be brought back).

import {get, post, del} from './api.js';
import {h, table, emptyRow, field, confirmDialog, isQuiet, fill, add, showPageError, roleTag, roleName} from './dom.js';
import {t} from './i18n.js';
import {timeEl} from './format.js';
import {createFieldErrors, inputTarget} from './fielderrors.js';
import * as apps from './apps.js';

const ROLES = ['viewer', 'sender', 'approver', 'admin'];

export async function render(ctx) {
  const {root, signal} = ctx;
  add(root, h('h1', {tabindex: '-1'}, t('app.title.keys')),
    h('p', {class: 'hint'}, t('keys.intro')));

  const created = h('section', {id: 'key-created', class: 'card', hidden: true, 'aria-labelledby': 'key-created-h', tabindex: '-1'});
  const list = h('div');
  add(root, created, createForm(ctx, created, refresh), h('section', {class: 'card', 'aria-labelledby': 'keys-h'},
    h('h2', {id: 'keys-h'}, t('nav.keys')), list));

  async function refresh() {
    const r = await get('/push/keys', {signal});
    fill(list, keysTable(r.keys || [], revoke));
  }

  async function revoke(k, btn) {
    const ok = await confirmDialog({title: t('keys.revokeTitle', {name: k.name}), ok: t('keys.revoke'),
      body: t('keys.revokeBody', {id: k.id})});
    if (!ok) return;
    btn.disabled = true;
    try {
      await del(`/push/keys/${encodeURIComponent(k.id)}`, {signal});
      await refresh();
    } catch (err) {
      btn.disabled = false;
      if (!isQuiet(err)) showPageError(root, new Error(t('keys.revokeFailed', {message: err.message})));
    }
  }

  await refresh();
}

function createForm(ctx, created, refresh) {
  const {signal} = ctx;
  const name = h('input', {id: 'key-name', type: 'text', required: true, maxlength: 64, autocomplete: 'off', spellcheck: 'false'});
  const role = h('select', {id: 'key-role'}, ROLES.map((r) => h('option', {value: r, selected: r === 'sender' ? true : null}, roleName(r))));
  const expires = h('input', {id: 'key-expires', type: 'text', placeholder: t('keys.never'), autocomplete: 'off', spellcheck: 'false'});
  // With several apps, a key may be limited to some; none ticked: every app.
  const appBoxes = apps.several() ? apps.list().map((a) => h('input', {type: 'checkbox', value: a.name, id: `key-app-${a.name}`, class: 'key-app'})) : [];
  const appsBlock = appBoxes.length ? h('fieldset', {class: 'field', id: 'key-apps'}, h('legend', null, t('keys.apps')),
    appBoxes.map((b) => h('label', {class: 'field-check'}, b, ' ', b.value)),
    h('p', {class: 'hint'}, t('keys.appsHint'))) : null;
  const formError = h('div', {id: 'key-form-error', class: 'alert', role: 'alert', tabindex: '-1', hidden: true});
  const submit = h('button', {type: 'submit', id: 'key-create', class: 'btn btn-primary'}, t('keys.create'));
  const form = h('form', {id: 'key-form', novalidate: true},
    field(t('keys.col.name'), name, t('keys.nameHint')),
    field(t('keys.col.role'), role, t('keys.roleHint')),
    appsBlock,
    field(t('keys.expiresIn'), expires, t('keys.expiresHint')),
    formError, h('div', {class: 'actions'}, submit));
  const byPath = {name, role, expires_in: expires};
  const errors = createFieldErrors(form, formError, (path) => {
    if (path.startsWith('apps')) return appsBlock ? {input: appBoxes[0], container: appsBlock, scope: appsBlock} : null;
    return inputTarget(byPath[path]);
  });
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    errors.clearAll();
    const body = {name: name.value.trim(), role: role.value};
    const ticked = appBoxes.filter((b) => b.checked).map((b) => b.value);
    if (ticked.length) body.apps = ticked;
    if (expires.value.trim()) body.expires_in = expires.value.trim();
    submit.disabled = true;
    try {
      const k = await post('/push/keys', body, {signal});
      showCreated(created, k);
      form.reset();
      role.value = 'sender'; // reset picks the first option: keep the usual role
      await refresh();
    } catch (err) {
      if (isQuiet(err)) return;
      errors.showApi(err);
      errors.focusFirst();
    } finally {
      submit.disabled = false;
    }
  });
  return h('section', {class: 'card', 'aria-labelledby': 'key-new-h'}, h('h2', {id: 'key-new-h'}, t('keys.new')), form);
}

// showCreated shows a new key's secret, once: leaving the page forgets it.
function showCreated(box, k) {
  const secret = h('input', {id: 'key-secret', type: 'text', readonly: true, value: k.key, 'aria-describedby': 'key-secret-hint', spellcheck: 'false'});
  const copied = h('span', {id: 'key-copied', class: 'hint', 'aria-live': 'polite'});
  const copy = h('button', {type: 'button', id: 'key-copy', class: 'btn', on: {click: async () => {
    secret.select();
    try {
      await navigator.clipboard.writeText(k.key);
      copied.textContent = t('keys.copied');
    } catch {
      copied.textContent = t('keys.copyByHand');
    }
  }}}, t('keys.copy'));
  fill(box, h('h2', {id: 'key-created-h'}, t('keys.created', {name: k.name})),
    h('p', {id: 'key-secret-hint', class: 'alert'}, t('keys.copyNow'), ' ', h('code', null, 'Authorization: Bearer <key>')),
    h('div', {class: 'actions'}, secret, copy, copied),
    h('p', {class: 'hint'}, t('keys.createdLine', {id: k.id, role: roleName(k.role)}), k.expires_at ? [' · ', t('keys.expires'), ' '] : '', k.expires_at ? timeEl(k.expires_at) : null));
  box.hidden = false;
  box.focus();
  secret.select();
}

function keysTable(keys, revoke) {
  const heads = [t('keys.col.name'), t('keys.col.id'), t('keys.col.role'), t('keys.apps'), t('keys.col.created'), t('keys.col.expires'),
    t('keys.col.lastUsed'), t('keys.col.status'), ''];
  const now = Date.now();
  const rows = keys.map((k) => {
    const expired = k.expires_at && Date.parse(k.expires_at) <= now;
    const status = k.revoked_at ? 'revoked' : expired ? 'expired' : 'active';
    return h('tr', {'data-key': k.id, 'data-status': status},
      h('th', {scope: 'row', 'data-raw': ''}, k.name),
      h('td', null, h('code', null, k.id)),
      h('td', null, roleTag(k.role)),
      h('td', null, k.apps ? k.apps.join(', ') : h('span', {class: 'muted'}, t('keys.everyApp'))),
      h('td', null, timeEl(k.created_at), k.created_by ? [' ', t('keys.by', {who: k.created_by})] : ''),
      h('td', null, k.expires_at ? timeEl(k.expires_at) : h('span', {class: 'muted'}, t('keys.never'))),
      h('td', {class: 'last-used'}, k.last_used_at ? timeEl(k.last_used_at) : h('span', {class: 'muted'}, t('keys.never'))),
      h('td', {class: 'status'}, status === 'revoked' ? [t('keys.status.revoked'), ' ', timeEl(k.revoked_at)] : t(`keys.status.${status}`)),
      h('td', null, status === 'revoked' ? null : h('button', {type: 'button', class: 'btn btn-small btn-danger revoke',
        'aria-label': t('keys.revokeLabel', {name: k.name, id: k.id}), on: {click: (ev) => revoke(k, ev.currentTarget)}}, t('keys.revoke'))));
  });
  return table({id: 'keys-table'}, heads, rows.length ? rows : emptyRow(heads.length, t('keys.none')));
}
