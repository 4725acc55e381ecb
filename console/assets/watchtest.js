// The watch page's test send of a held broadcast (POST .../test): one row
// per device with its platform, the outcome in plain words, and for a
// user who got nothing, why (a device invalidated when, by which code).

import {post} from './api.js';
import {h, table, emptyRow, fill, isQuiet} from './dom.js';
import {timeEl} from './format.js';
import {explain} from './watchfailures.js';
import {t, tOr} from './i18n.js';
import {enumEl} from './enums.js';

function tokenPrefix(v) {
  const x = String(v || '');
  return x.length > 12 ? x.slice(0, 12) + '…' : x;
}

// skipReason says why a user got nothing, with the last invalidated
// device's time and code when the server knows them.
function skipReason(u) {
  if (u.reason === 'no_valid_tokens' && u.invalidated_at) {
    return h('span', null, t('watch.test.invalidatedAt'), ' ', timeEl(u.invalidated_at),
      u.invalid_reason ? ' · ' + t('watch.test.invalidatedBy', {code: u.invalid_reason}) + ' ' + explain(u.invalid_reason) : '');
  }
  return tOr(`watch.test.skip.${u.reason}`, u.reason);
}

export function testReport(report) {
  const rows = (report.results || []).map((r) => h('tr', {'data-outcome': r.outcome},
    h('td', {class: 'mono', title: r.token_id != null ? t('watch.test.tokenId', {id: r.token_id}) : null}, tokenPrefix(r.token)),
    h('td', {class: 'num'}, r.user_id ?? '—'),
    r.platform ? enumEl('platform', r.platform, {class: 'platform'}, 'td') : h('td', {class: 'platform'}, '—'),
    h('td', {title: r.outcome}, tOr(`watch.test.outcome.${r.outcome}`, r.outcome)),
    h('td', {class: 'wrap'}, r.code ? h('span', null, explain(r.code), ' ', h('code', {class: 'muted'}, r.code)) : '—',
      r.invalidated ? h('span', {class: 'muted'}, ' · ', t('watch.test.nowInvalidated')) : null)));
  const missing = report.users_without_tokens || [];
  const results = report.results || [];
  const users = new Set(results.map((r) => r.user_id).filter((u) => u != null)).size;
  return h('div', {class: 'test-report'},
    h('p', {id: 'test-summary'}, t('watch.test.reached', {count: users}), ' ', t('watch.test.devices', {count: results.length}), ' ',
      t('watch.test.summary', {succeeded: report.succeeded ?? 0, failed: report.failed ?? 0})),
    table({id: 'test-results'}, [t('watch.test.device'), t('watch.test.user'), t('watch.test.platform'), t('watch.test.outcome'), t('watch.test.why')],
      rows.length ? rows : emptyRow(5, t('watch.test.noDevice'))),
    missing.length ? h('ul', {class: 'plain', id: 'test-skipped'}, missing.map((u) =>
      h('li', {'data-user': u.user_id, 'data-reason': u.reason}, t('watch.test.user'), ` ${u.user_id}: `, skipReason(u)))) : null);
}

// testForm sends the held message to a few users' devices.
export function testForm(base, signal) {
  const ids = h('input', {id: 'watch-test-user_ids', type: 'text', inputmode: 'numeric', autocomplete: 'off', placeholder: '101, 102'});
  const out = h('div', {'aria-live': 'polite'});
  const err = h('p', {class: 'error-text', role: 'alert', hidden: true});
  const submit = h('button', {type: 'submit', id: 'btn-test', class: 'btn'}, t('watch.test.send'));
  return h('form', {class: 'card', novalidate: true, on: {submit: async (ev) => {
    ev.preventDefault();
    err.hidden = true;
    const list = ids.value.split(/[\s,;]+/).filter(Boolean);
    if (!list.length || list.some((x) => !/^[1-9]\d*$/.test(x))) {
      err.textContent = t('watch.test.badIds');
      err.hidden = false;
      ids.focus();
      return;
    }
    submit.disabled = true;
    fill(out, h('p', {class: 'muted'}, t('watch.test.sending')));
    try {
      fill(out, testReport(await post(`${base}/test`, {user_ids: list.map(Number)}, {signal})));
    } catch (e) {
      if (isQuiet(e)) return;
      out.replaceChildren();
      err.textContent = e.message;
      err.hidden = false;
    } finally {
      submit.disabled = false;
    }
  }}},
  h('h2', null, t('watch.test.heading')),
  h('p', {class: 'hint'}, t('watch.test.hint')),
  h('div', {class: 'row row-end'},
    h('div', {class: 'field'}, h('label', {for: ids.id}, t('watch.test.userIds')), ids),
    h('div', {class: 'field'}, submit)),
  err, out);
}
