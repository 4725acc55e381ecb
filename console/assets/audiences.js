// Audiences: the built-in ones and the named ones the server was
// configured with (their typed parameters and template variables; the
// chosen app's, when there are several). A
// sender can count a named audience with given parameters (a POST, so not
// for viewers).

import {get, post, may} from './api.js';
import {h, table, emptyRow, field, isQuiet, fill, add} from './dom.js';
import {num, parseParam, paramHint} from './format.js';
import * as apps from './apps.js';
import {t} from './i18n.js';

// The built-in audiences in words, with the API's form for engineers.
const builtIn = (n) => ({
  all: [t('audiences.builtin.all'), ' ', h('code', null, '{"all": true}')],
  user_ids: [t('audiences.builtin.userIds'), ' ', h('code', null, '{"user_ids": [1, 2, 3]}')],
})[n] || '';

export async function render(ctx) {
  const {root, signal} = ctx;
  add(root, h('h1', {tabindex: '-1'}, t('nav.audiences')));
  const list = await get('/push/audiences', {signal});

  add(root, h('section', {class: 'card', 'aria-labelledby': 'builtin-h'},
    h('h2', {id: 'builtin-h'}, t('audiences.builtin')),
    h('dl', {class: 'deflist'}, (list.built_in || []).map((n) => [h('dt', null, h('code', null, n)), h('dd', null, builtIn(n))]))));

  const named = (list.named || []).filter(apps.mine);
  add(root, h('h2', null, t('audiences.named')));
  if (!named.length) {
    add(root, h('p', {class: 'muted'}, apps.several()
      ? t('audiences.noneForApp', {app: apps.current()}) : t('audiences.none')));
  }
  named.forEach((a, i) => add(root, namedCard(a, i, may('viewer'), signal)));
}

function namedCard(a, i, sender, signal) {
  const params = Object.entries(a.params || {});
  const card = h('section', {class: 'card', 'data-audience': a.name, 'aria-labelledby': `aud-${i}-h`},
    h('h3', {id: `aud-${i}-h`}, h('code', null, a.name)),
    a.description ? h('p', {'data-raw': ''}, a.description) : null,
    table(null, [t('audiences.param'), t('audiences.type')],
      params.length ? params.map(([n, ty]) => h('tr', null, h('td', null, h('code', null, n)), h('td', null, h('code', null, ty)))) : emptyRow(2, t('audiences.noParams'))),
    h('p', null, t('audiences.vars'), ' ',
      a.vars == null ? h('span', {class: 'muted'}, t('audiences.varsUnchecked'))
        : a.vars.length ? a.vars.map((v, j) => [j ? ', ' : '', h('code', null, `{{.${v}}}`)]) : h('span', {class: 'muted'}, t('audiences.varsNone'))));
  if (sender) add(card, countForm(a, i, params, signal));
  return card;
}

function countForm(a, i, params, signal) {
  const inputs = params.map(([n, t]) => h('input', {
    id: `aud-${i}-p-${n.replace(/[^A-Za-z0-9_-]/g, '_')}`, type: 'text', 'data-param': n, 'data-type': t,
    autocomplete: 'off', spellcheck: 'false',
  }));
  const out = h('p', {class: 'count-out', 'aria-live': 'polite'});
  const submit = h('button', {type: 'submit', class: 'btn'}, t('audiences.count'));
  const form = h('form', {class: 'count-form', novalidate: true, on: {submit: async (ev) => {
    ev.preventDefault();
    const p = {};
    try {
      for (const input of inputs) {
        if (input.value.trim() !== '') p[input.dataset.param] = parseParam(input.dataset.type, input.value);
      }
    } catch (e) {
      out.className = 'count-out error-text';
      out.textContent = e.message;
      return;
    }
    submit.disabled = true;
    out.className = 'count-out muted';
    out.textContent = t('common.counting');
    try {
      const r = await post(`/push/audiences/${encodeURIComponent(a.name)}/preview`, {params: p}, {signal});
      out.className = 'count-out';
      fill(out, h('strong', {class: 'count'}, num(r.count)), t('audiences.devices', {count: r.count}),
        r.sample_user_ids?.length ? t('audiences.sample', {ids: r.sample_user_ids.join(', ')}) : '');
    } catch (e) {
      if (isQuiet(e)) return;
      out.className = 'count-out error-text';
      out.textContent = e.field ? t('fielderrors.at', {field: e.field, message: e.message}) : e.message;
    } finally {
      submit.disabled = false;
    }
  }}},
  h('h4', null, t('audiences.count')),
  h('div', {class: 'row row-end'}, inputs.map((input, k) => field(params[k][0], input, paramHint(params[k][1]))),
    h('div', {class: 'field'}, submit)),
  out);
  return form;
}
