// The watch page's error codes and failures: each code explained in plain
// words (the raw code and FCM's message stay for the engineer), the
// failures paged by cursor and filtered by code and by user (?user_id=;
// the user's devices are looked up too, GET /push/users/{id}/deliveries),
// and the failures exported as CSV (GET .../outcomes?outcome=failed
// &format=csv, with the same code and user).

import {get, qs} from './api.js';
import {h, emptyRow, fill, isQuiet} from './dom.js';
import {num, timeEl} from './format.js';
import {t, tOr} from './i18n.js';
import {enumEl} from './enums.js';

const FAILURES_PAGE = 50;
const FAILURES_MIN_MS = 3000;

// Every code pushfan reports (fcm.KnownCodes) has its plain words.
const KNOWN = new Set(['UNREGISTERED', 'INVALID_ARGUMENT', 'SENDER_ID_MISMATCH', 'QUOTA_EXCEEDED', 'UNAVAILABLE',
  'INTERNAL', 'THIRD_PARTY_AUTH_ERROR', 'UNAUTHENTICATED', 'PERMISSION_DENIED', 'NOT_FOUND', 'TIMEOUT',
  'NETWORK_ERROR', 'UNKNOWN', 'SENDER_PANIC', 'TEMPLATE_ERROR', 'MESSAGE_ERROR']);

// explain is a code's meaning in the operator's words.
export function explain(code) {
  return KNOWN.has(code) ? t(`watch.code.${code}`) : t('watch.codeUnknown');
}

// codeCell: the plain words first, the raw code under them.
function codeCell(code) {
  return h('td', {class: 'wrap'}, h('span', {class: 'code-words'}, explain(code)), ' ', h('code', {class: 'muted'}, code));
}

// codesCard returns the error codes card and update(errors).
export function codesCard() {
  const body = h('tbody');
  const el = h('section', {class: 'card', 'aria-labelledby': 'codes-h'},
    h('h2', {id: 'codes-h'}, t('watch.codes.heading')),
    h('div', {class: 'table-wrap'}, h('table', {id: 'error-codes'},
      h('thead', null, h('tr', null, h('th', {scope: 'col'}, t('watch.codes.what')), h('th', {scope: 'col'}, t('watch.codes.devices')))), body)));
  const update = (entries) => fill(body, ...(entries.length
    ? entries.map(([code, n]) => h('tr', {'data-code': code}, codeCell(code), h('td', {class: 'num'}, num(n))))
    : [emptyRow(2, t('watch.codes.none'))]));
  return {el, update};
}

// failuresCard returns the failures card; codes(entries) offers the
// broadcast's codes in the filter, changed() reloads (at most every 3 s),
// final(b) shows the export once the broadcast is final.
export function failuresCard(ctx, id, base) {
  const {signal} = ctx;
  const fs = {cursor: '', next: null, code: '', user: '', seq: 0, lastLoad: 0, timer: 0};
  ctx.cleanup(() => clearTimeout(fs.timer));
  const codeSelect = h('select', {id: 'failures-code', on: {change: () => {
    fs.code = codeSelect.value;
    fs.cursor = '';
    exportHref();
    load();
  }}}, h('option', {value: ''}, t('watch.failures.allCodes')));
  const body = h('tbody');
  const tbl = h('table', {id: 'failures', 'aria-busy': 'true'},
    h('thead', null, h('tr', null, [t('watch.failures.token'), t('watch.failures.user'), t('watch.failures.why'),
      t('watch.failures.message'), t('watch.failures.attempts'), t('watch.failures.at')].map((x) => h('th', {scope: 'col'}, x)))),
    body);
  const error = h('p', {class: 'error-text', role: 'alert', hidden: true});
  const older = h('button', {type: 'button', id: 'failures-older', class: 'btn', disabled: true, on: {click: () => {
    fs.cursor = fs.next;
    load();
  }}}, t('watch.failures.older'));
  const newest = h('button', {type: 'button', id: 'failures-newest', class: 'btn', disabled: true, on: {click: () => {
    fs.cursor = '';
    load();
  }}}, t('watch.failures.newest'));
  const exportLink = h('a', {id: 'btn-failures-csv', class: 'btn', hidden: true}, t('watch.failures.export'));
  // The download takes the list's filters: what is shown is what is saved.
  const exportHref = () => {
    exportLink.href = `${base}/outcomes` + qs({outcome: 'failed', format: 'csv', code: fs.code, user_id: fs.user});
    exportLink.download = `broadcast-${id}-failures${fs.code ? '-' + fs.code : ''}${fs.user ? '-user-' + fs.user : ''}.csv`;
  };
  exportHref();

  // One user's failures (the list filtered) and devices in this broadcast;
  // an empty box lists every user's again.
  const userInput = h('input', {id: 'failures-user', type: 'text', inputmode: 'numeric', autocomplete: 'off', size: 10});
  const userOut = h('div', {id: 'failures-user-result', 'aria-live': 'polite'});
  const userClear = h('button', {type: 'button', id: 'btn-failures-user-clear', class: 'btn', hidden: true, on: {click: () => {
    userInput.value = '';
    filterUser('');
  }}}, t('watch.failures.allUsers'));
  const userForm = h('form', {class: 'field field-inline', novalidate: true, on: {submit: (ev) => {
    ev.preventDefault();
    filterUser(userInput.value.trim());
  }}},
  h('label', {for: userInput.id}, t('watch.failures.byUser')), userInput,
  h('button', {type: 'submit', id: 'btn-failures-user', class: 'btn'}, t('watch.failures.show')), userClear);

  function filterUser(value) {
    if (value && !/^[1-9]\d*$/.test(value)) {
      fill(userOut, h('p', {class: 'error-text', role: 'alert'}, t('watch.failures.userInvalid')));
      return;
    }
    if (value !== fs.user) {
      fs.user = value;
      fs.cursor = '';
      userClear.hidden = !value;
      exportHref();
      load();
    }
    lookUp(value);
  }

  const el = h('section', {class: 'card', 'aria-labelledby': 'failures-h'},
    h('h2', {id: 'failures-h'}, t('watch.failures.heading')),
    h('div', {class: 'toolbar'},
      h('div', {class: 'field field-inline'}, h('label', {for: 'failures-code'}, t('watch.failures.code')), codeSelect),
      userForm, exportLink),
    userOut,
    h('div', {class: 'table-wrap'}, tbl),
    error,
    h('div', {class: 'pager'}, newest, older));

  async function load() {
    const seq = ++fs.seq;
    fs.lastLoad = Date.now();
    tbl.setAttribute('aria-busy', 'true');
    older.disabled = newest.disabled = true;
    try {
      const page = await get(`${base}/failures` + qs({limit: FAILURES_PAGE, cursor: fs.cursor, code: fs.code, user_id: fs.user}), {signal});
      if (seq !== fs.seq) return;
      fs.next = page.next_cursor || null;
      const list = page.failures || [];
      fill(body, ...(list.length ? list.map((f) => h('tr', {'data-token': f.token_id, 'data-user': f.user_id, 'data-code': f.code},
        h('td', {class: 'num'}, f.token_id),
        h('td', {class: 'num'}, f.user_id),
        codeCell(f.code),
        h('td', {class: 'wrap muted'}, f.message),
        h('td', {class: 'num'}, num(f.attempts)),
        h('td', null, timeEl(f.created_at)))) : [emptyRow(6, noneText())]));
      error.hidden = true;
    } catch (err) {
      if (seq !== fs.seq || isQuiet(err)) return;
      error.textContent = t('watch.failures.loadError', {error: err.message});
      error.hidden = false;
    } finally {
      if (seq === fs.seq) {
        older.disabled = !fs.next;
        newest.disabled = !fs.cursor;
        tbl.setAttribute('aria-busy', 'false');
      }
    }
  }

  // The empty list's words: the filters in the operator's words.
  function noneText() {
    if (fs.user && fs.code) return t('watch.failures.noneWithForUser', {user: fs.user});
    if (fs.user) return t('watch.failures.noneForUser', {user: fs.user});
    return fs.code ? t('watch.failures.noneWith') : t('watch.failures.none');
  }

  // The user's deliveries from this broadcast down: the first one is
  // this broadcast's if the user was in it.
  async function lookUp(value) {
    if (!value) {
      userOut.replaceChildren();
      return;
    }
    fill(userOut, h('p', {class: 'muted'}, t('watch.failures.looking')));
    try {
      const page = await get(`/push/users/${value}/deliveries` + qs({limit: 1, after: Number(id) + 1}), {signal});
      const d = (page.deliveries || []).find((x) => String(x.broadcast_id) === String(id));
      if (!d) {
        fill(userOut, h('p', {id: 'failures-user-none', class: 'muted'}, t('watch.failures.userNotIn', {user: value})));
        return;
      }
      const failed = d.devices.filter((x) => x.outcome === 'failed').length;
      fill(userOut, h('p', null, t('watch.failures.userSummary', {user: value, count: d.devices.length, failed})),
        h('div', {class: 'table-wrap'}, h('table', {id: 'failures-user-devices'},
          h('thead', null, h('tr', null, [t('watch.failures.token'), t('watch.failures.platform'), t('watch.failures.outcome'), t('watch.failures.why')]
            .map((x) => h('th', {scope: 'col'}, x)))),
          h('tbody', null, d.devices.map((x) => h('tr', {'data-token': x.token_id, 'data-outcome': x.outcome},
            h('td', {class: 'num'}, x.token_id),
            x.platform ? enumEl('platform', x.platform, null, 'td') : h('td', null, '—'),
            h('td', {title: x.outcome}, tOr(`watch.outcome.${x.outcome}`, x.outcome)),
            x.code ? codeCell(x.code) : h('td', null, '—')))))));
    } catch (err) {
      if (isQuiet(err)) return;
      fill(userOut, h('p', {class: 'error-text', role: 'alert'}, t('watch.failures.userError', {error: err.message})));
    }
  }

  return {
    el,
    load,
    codes(entries) {
      const keep = codeSelect.value;
      const codes = entries.map(([c]) => c).sort();
      fill(codeSelect, h('option', {value: ''}, t('watch.failures.allCodes')),
        codes.map((c) => h('option', {value: c}, `${explain(c)} (${c})`)));
      codeSelect.value = codes.includes(keep) ? keep : '';
      if (codeSelect.value !== keep) {
        fs.code = '';
        exportHref();
      }
    },
    final(b, isFinal) {
      exportLink.hidden = !(isFinal && b.failed > 0 && listsOutcomes(b));
    },
    // At most one reload per 3 s, and always one after the last change.
    changed() {
      if (fs.timer) return;
      const wait = Math.max(0, fs.lastLoad + FAILURES_MIN_MS - Date.now());
      fs.timer = setTimeout(() => {
        fs.timer = 0;
        load();
      }, wait);
    },
  };
}

// listsOutcomes: the broadcast's kept outcomes can be listed by token and
// user (every audience but a named one without token_id).
export function listsOutcomes(b) {
  return !(b.audience && b.audience.name && !b.audience.token_cursor);
}
