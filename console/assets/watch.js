// Watch one broadcast live (#/broadcasts/ID).
//
// The live state comes from the server's event stream (one `state` event
// a second with the broadcast and the last ~120 one-second samples); if
// the stream fails the page polls every 2 s instead. The failures table
// reloads when `failed` changes, at most every 3 s. Actions are rendered
// only for senders and only while the status allows them. With several
// apps, the page names the broadcast's app. A broadcast in a message
// category shows it, the category's rules as it ran under them (its proof
// of consent, unchanged by a later edit of the configuration), and the
// devices its consent left out or its night window deferred.

import {get, post, qs, may} from './api.js';
import {h, s, badge, table, emptyRow, showPageError, clearPageError, isQuiet, confirmDialog, defList, fill, add} from './dom.js';
import {num, timeEl, duration, perSecond, isFinal} from './format.js';
import {lineChart} from './chart.js';
import {testReport, windowText} from './compose.js';
import {headline} from './broadcasts.js';
import {engagementCard} from './engagement.js';
import {broadcastDeliveries} from './webhooks.js';
import {describe} from './segfilter.js';
import * as apps from './apps.js';
import {scheduleCard, dryRunText} from './schedule.js';
import {t} from './i18n.js';

// What POST .../resend resends by default (the transient codes).
const TRANSIENT = ['UNAVAILABLE', 'INTERNAL', 'QUOTA_EXCEEDED', 'TIMEOUT', 'NETWORK_ERROR'];
const CANCELABLE = new Set(['scheduled', 'held', 'planning', 'queued', 'running']);
// capped: withheld by a frequency cap, an outcome beside the others.
const SEGMENTS = ['succeeded', 'failed', 'canceled', 'capped', 'waiting'];
const FAILURES_PAGE = 50;
const POLL_MS = 2000;
const FAILURES_MIN_MS = 3000;

export async function render(ctx) {
  const {root, signal} = ctx;
  const id = ctx.params[0];
  const sender = may('sender');
  const base = `/push/broadcasts/${id}`;

  add(root, h('h1', {tabindex: '-1'}, `Broadcast #${id}`));
  const first = await get(base, {signal});
  if (signal.aborted) return;

  const st = {b: null, series: [], actionsKey: '', detailsKey: '', codesKey: '', polling: false, lastSample: null};

  // ---- Skeleton -------------------------------------------------------
  const status = badge(first.status, 'watch-status');
  const dryTag = h('span', {class: 'tag', hidden: true}, 'dry run');
  const subtitle = h('p', {class: 'subtitle'});
  const actions = h('div', {class: 'actions', id: 'actions'});
  // Every kept target's outcome as CSV (GET /push/broadcasts/{id}/outcomes),
  // for any role, once the broadcast is final.
  const download = h('a', {id: 'btn-outcomes', class: 'btn', hidden: true, href: `/push/broadcasts/${id}/outcomes?format=csv`, download: `broadcast-${id}-outcomes.csv`}, 'Download outcomes');
  const actionError = h('p', {id: 'action-error', class: 'alert', role: 'alert', hidden: true});

  const segs = {};
  const counts = {};
  const progress = h('div', {id: 'progress', class: 'progress', role: 'progressbar', 'aria-valuemin': '0'},
    SEGMENTS.map((k) => (segs[k] = h('div', {class: ['seg', 'seg-' + k]}))));
  const count = (k, label) => h('li', null, h('span', {class: ['swatch', 'swatch-' + k], 'aria-hidden': 'true'}),
    label, ' ', (counts[k] = h('strong', {id: 'count-' + k, 'data-value': '0'}, '0')));
  const legend = h('ul', {class: 'legend'},
    count('targeted', 'Targeted'), count('succeeded', 'Succeeded'), count('failed', 'Failed'),
    count('canceled', 'Canceled'), count('capped', 'Capped'), count('waiting', 'Waiting'), count('pending', 'Pending'));
  const pace = h('p', {class: 'muted'});
  // Until the audience is counted (planning, scheduled, held before its
  // count) targeted is null: the bar has nothing to divide by, so it gives
  // way to "counting…" (a bar of a part of the audience would run ahead).
  const counting = h('p', {id: 'progress-counting', class: 'muted', hidden: true}, 'counting…');
  const planning = h('p', {id: 'planning-note', class: 'muted', hidden: true},
    'The audience is being counted; sends may start meanwhile. Targeted and the bar follow once it is.');

  const chart = s('svg', {id: 'rate-chart', class: 'chart', role: 'img', 'aria-label': 'Sends per second'});

  const messageCard = h('section', {class: 'card', 'aria-labelledby': 'msg-h'});
  const detailsCard = h('section', {class: 'card', 'aria-labelledby': 'details-h'});
  const codesBody = h('tbody');
  const codesTable = h('div', {class: 'table-wrap'},
    h('table', {id: 'error-codes'}, h('thead', null, h('tr', null, h('th', {scope: 'col'}, 'Code'), h('th', {scope: 'col'}, 'Targets'))), codesBody));

  const testCard = h('div');
  // Before it starts: when it goes, and its Edit (schedule.js).
  const schedule = scheduleCard(ctx, base, (b) => update(b));

  // Failures: their own state, paged by cursor.
  const fs = {cursor: '', next: null, code: '', seq: 0, lastLoad: 0, timer: 0, failedSeen: first.failed};
  ctx.cleanup(() => clearTimeout(fs.timer));
  const codeSelect = h('select', {id: 'failures-code', on: {change: () => {
    fs.code = codeSelect.value;
    fs.cursor = '';
    loadFailures();
  }}}, h('option', {value: ''}, 'All codes'));
  const failBody = h('tbody');
  const failTable = h('table', {id: 'failures', 'aria-busy': 'true'},
    h('thead', null, h('tr', null, ['Token id', 'User id', 'Code', 'Message', 'Attempts', 'At'].map((t) => h('th', {scope: 'col'}, t)))),
    failBody);
  const failError = h('p', {class: 'error-text', role: 'alert', hidden: true});
  const older = h('button', {type: 'button', id: 'failures-older', class: 'btn', disabled: true, on: {click: () => {
    fs.cursor = fs.next;
    loadFailures();
  }}}, 'Older');
  const newest = h('button', {type: 'button', id: 'failures-newest', class: 'btn', disabled: true, on: {click: () => {
    fs.cursor = '';
    loadFailures();
  }}}, 'Newest');

  add(root, 
    h('div', {class: 'title-row'}, status, dryTag, subtitle),
    schedule.el,
    sender ? actions : null,
    h('div', {class: 'actions'}, download),
    actionError,
    h('section', {class: 'card', 'aria-labelledby': 'progress-h'},
      h('h2', {id: 'progress-h'}, 'Progress'), progress, counting, legend, planning, pace),
    testCard,
    h('section', {class: 'card', 'aria-labelledby': 'rate-h'},
      h('h2', {id: 'rate-h'}, 'Sends per second'), chart),
    engagementCard(ctx, base),
    h('div', {class: 'grid-2'}, messageCard, detailsCard),
    h('section', {class: 'card', 'aria-labelledby': 'codes-h'},
      h('h2', {id: 'codes-h'}, 'Error codes'), codesTable),
    h('section', {class: 'card', 'aria-labelledby': 'failures-h'},
      h('h2', {id: 'failures-h'}, 'Failures'),
      h('div', {class: 'toolbar'}, h('div', {class: 'field field-inline'}, h('label', {for: 'failures-code'}, 'Code'), codeSelect)),
      h('div', {class: 'table-wrap'}, failTable),
      failError,
      h('div', {class: 'pager'}, newest, older)),
    broadcastDeliveries(ctx, id));

  // ---- Updating -------------------------------------------------------
  function update(b) {
    st.b = b;
    schedule.update(b);
    status.textContent = b.status;
    status.className = 'badge badge-' + b.status;
    dryTag.hidden = !b.dry_run;
    subtitle.textContent = `${apps.several() && b.app ? b.app + ' · ' : ''}${b.trigger}${b.created_by ? ' by ' + b.created_by : ''} · ${headline(b)}`;

    const known = b.targeted != null;
    planning.hidden = !b.planning;
    progress.hidden = !known;
    counting.hidden = known;
    const waiting = b.waiting || 0;
    const capped = b.capped || 0;
    const done = b.succeeded + b.failed + b.canceled + capped;
    const pending = known ? Math.max(0, b.targeted - done - waiting) : null;
    const values = {targeted: b.targeted, succeeded: b.succeeded, failed: b.failed, canceled: b.canceled, capped, waiting, pending};
    for (const [k, v] of Object.entries(values)) {
      counts[k].textContent = v == null ? 'counting…' : num(v);
      counts[k].dataset.value = v == null ? '' : String(v);
    }
    for (const k of SEGMENTS) {
      const pct = known && b.targeted ? (values[k] / b.targeted) * 100 : 0;
      segs[k].style.width = Math.min(100, pct) + '%';
      segs[k].title = `${k}: ${num(values[k])}`;
    }
    if (known) {
      progress.setAttribute('aria-valuemax', String(b.targeted));
      progress.setAttribute('aria-valuenow', String(Math.min(done, b.targeted)));
      progress.setAttribute('aria-valuetext',
        `${num(b.succeeded)} succeeded, ${num(b.failed)} failed, ${num(b.canceled)} canceled, ${num(capped)} capped, ${num(waiting)} waiting, ${num(pending)} pending of ${num(b.targeted)}`);
    } else {
      progress.removeAttribute('aria-valuemax');
      progress.removeAttribute('aria-valuenow');
      progress.setAttribute('aria-valuetext', `${num(done)} done; the audience is being counted`);
    }
    fill(pace, ...paceLine(b, st.series));

    const codesKey = JSON.stringify(b.errors || {});
    if (codesKey !== st.codesKey) {
      st.codesKey = codesKey;
      renderCodes(b.errors || {});
    }
    const detailsKey = JSON.stringify({...b, succeeded: 0, failed: 0, canceled: 0, capped: 0, waiting: 0, errors: 0, duration_ms: b.duration_ms == null});
    if (detailsKey !== st.detailsKey || !isFinal(b.status)) {
      st.detailsKey = detailsKey;
      fill(messageCard, ...messageView(b));
      fill(detailsCard, ...detailsView(b));
    }
    // Buttons are rebuilt only when what they offer changes, so focus on
    // one is not lost every second.
    download.hidden = !isFinal(b.status);
    const actionsKey = `${b.status}|${b.failed > 0}`;
    if (sender && actionsKey !== st.actionsKey) {
      st.actionsKey = actionsKey;
      renderActions(b);
    }
    if (b.failed !== fs.failedSeen) {
      fs.failedSeen = b.failed;
      failuresChanged();
    }
  }

  function renderCodes(errors) {
    const entries = Object.entries(errors).sort((a, b) => b[1] - a[1]);
    fill(codesBody, ...(entries.length
      ? entries.map(([code, n]) => h('tr', {'data-code': code}, h('td', null, h('code', null, code)), h('td', {class: 'num'}, num(n))))
      : [emptyRow(2, 'No errors.')]));
    // The failures filter offers the codes this broadcast has.
    const keep = codeSelect.value;
    const codes = entries.map(([c]) => c).sort();
    fill(codeSelect, h('option', {value: ''}, 'All codes'), codes.map((c) => h('option', {value: c}, c)));
    codeSelect.value = codes.includes(keep) ? keep : '';
    if (codeSelect.value !== keep) {
      fs.code = '';
    }
  }

  function drawChart() {
    lineChart(chart, st.series);
    const last = st.series[st.series.length - 1];
    chart.setAttribute('aria-label', `Sends per second${last ? ': ' + perSecond(last.per_second) + ' in the last second' : ''}`);
  }

  // ---- Actions --------------------------------------------------------
  function renderActions(b) {
    const btn = (id, label, cls, fn) => h('button', {type: 'button', id, class: ['btn', cls], on: {click: fn}}, label);
    fill(actions, 
      CANCELABLE.has(b.status) ? btn('btn-cancel', 'Cancel', 'btn-danger', onCancel) : null,
      b.status === 'held' && may('approver') ? btn('btn-release', 'Release', 'btn-primary', onRelease) : null,
      isFinal(b.status) && b.failed > 0 ? btn('btn-resend', 'Resend to failed', '', onResend) : null,
      h('a', {id: 'btn-duplicate', class: 'btn', href: `#/compose?from=${b.id}`}, 'Duplicate as new'));
    testCard.replaceChildren();
    if (b.status === 'held') add(testCard, testForm());
  }

  function showActionError(err) {
    if (isQuiet(err)) return;
    actionError.textContent = err ? err.message : '';
    actionError.hidden = !err;
  }

  async function act(button, fn) {
    showActionError(null);
    button.disabled = true;
    try {
      await fn();
    } catch (err) {
      showActionError(err);
    } finally {
      if (button.isConnected) button.disabled = false;
    }
  }

  async function onCancel(ev) {
    const button = ev.currentTarget; // gone from the event after the await
    const ok = await confirmDialog({
      title: `Cancel broadcast #${id}?`,
      body: 'Targets not sent yet are closed as canceled; what was sent stays sent. This cannot be undone.',
      ok: 'Cancel broadcast',
    });
    if (ok) await act(button, async () => update(await post(`${base}/cancel`, {}, {signal})));
  }

  async function onRelease(ev) {
    const button = ev.currentTarget; // gone from the event after the await
    const b = st.b;
    const ok = await confirmDialog({
      title: `Release broadcast #${id}?`,
      body: `It goes out to ${b.targeted == null ? 'its audience (still being counted)' : num(b.targeted) + ' targets'}${b.send_at ? ' at its send time' : ' now'}.`,
      ok: 'Release',
    });
    if (ok) await act(button, async () => update(await post(`${base}/release`, {}, {signal})));
  }

  async function onResend(ev) {
    const button = ev.currentTarget; // gone from the event after the await
    const codes = Object.keys(st.b.errors || {}).sort();
    const preset = codes.filter((c) => TRANSIENT.includes(c));
    const boxes = codes.map((c) => {
      const input = h('input', {type: 'checkbox', id: `resend-code-${c}`, value: c, checked: preset.includes(c)});
      return h('div', {class: 'field field-check'}, input, h('label', {for: input.id}, `${c} (${num(st.b.errors[c])})`));
    });
    const body = h('div', null,
      h('p', null, `A new broadcast goes to the targets of #${id} that failed with the codes ticked below.`),
      h('fieldset', {class: 'plain'}, h('legend', null, 'Codes'), boxes),
      h('p', {class: 'hint'}, `With none ticked, pushfan resends the transient ones (${TRANSIENT.join(', ')}).`));
    const ok = await confirmDialog({title: `Resend the failures of #${id}?`, body, ok: 'Resend'});
    if (!ok) return;
    const chosen = boxes.map((b) => b.querySelector('input')).filter((i) => i.checked).map((i) => i.value);
    // The preset is what the server does with {} anyway.
    const same = chosen.length === preset.length && chosen.every((c) => preset.includes(c));
    const req = same || !chosen.length ? {} : {codes: chosen};
    await act(button, async () => {
      const nb = await post(`${base}/resend?wait=0`, req, {signal});
      location.hash = `#/broadcasts/${nb.id}`;
    });
  }

  function testForm() {
    const ids = h('input', {id: 'watch-test-user_ids', type: 'text', inputmode: 'numeric', autocomplete: 'off', placeholder: '101, 102'});
    const out = h('div', {'aria-live': 'polite'});
    const err = h('p', {class: 'error-text', role: 'alert', hidden: true});
    const submit = h('button', {type: 'submit', id: 'btn-test', class: 'btn'}, 'Test send');
    const form = h('form', {class: 'card', novalidate: true, on: {submit: async (ev) => {
      ev.preventDefault();
      err.hidden = true;
      const list = ids.value.split(/[\s,;]+/).filter(Boolean);
      if (!list.length || list.some((x) => !/^[1-9]\d*$/.test(x))) {
        err.textContent = 'Enter user ids (whole numbers), separated by commas or spaces.';
        err.hidden = false;
        ids.focus();
        return;
      }
      submit.disabled = true;
      fill(out, h('p', {class: 'muted'}, 'Sending…'));
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
    h('h2', null, 'Test send before release'),
    h('p', {class: 'hint'}, 'Sends this held message now to a few users\' devices; the broadcast stays held.'),
    h('div', {class: 'row row-end'},
      h('div', {class: 'field'}, h('label', {for: ids.id}, 'User ids'), ids),
      h('div', {class: 'field'}, submit)),
    err, out);
    return form;
  }

  // ---- Failures -------------------------------------------------------
  async function loadFailures() {
    const seq = ++fs.seq;
    fs.lastLoad = Date.now();
    failTable.setAttribute('aria-busy', 'true');
    older.disabled = newest.disabled = true;
    try {
      const page = await get(`${base}/failures` + qs({limit: FAILURES_PAGE, cursor: fs.cursor, code: fs.code}), {signal});
      if (seq !== fs.seq) return;
      fs.next = page.next_cursor || null;
      const list = page.failures || [];
      fill(failBody, ...(list.length ? list.map((f) => h('tr', {'data-token': f.token_id},
        h('td', {class: 'num'}, f.token_id),
        h('td', {class: 'num'}, f.user_id),
        h('td', null, h('code', null, f.code)),
        h('td', {class: 'wrap'}, f.message),
        h('td', {class: 'num'}, num(f.attempts)),
        h('td', null, timeEl(f.created_at)))) : [emptyRow(6, fs.code ? `No failures with ${fs.code}.` : 'No failures.')]));
      failError.hidden = true;
    } catch (err) {
      if (seq !== fs.seq || isQuiet(err)) return;
      failError.textContent = 'Failures could not be loaded: ' + err.message;
      failError.hidden = false;
    } finally {
      if (seq === fs.seq) {
        older.disabled = !fs.next;
        newest.disabled = !fs.cursor;
        failTable.setAttribute('aria-busy', 'false');
      }
    }
  }

  // At most one reload per 3 s, and always one after the last change.
  function failuresChanged() {
    if (fs.timer) return;
    const wait = Math.max(0, fs.lastLoad + FAILURES_MIN_MS - Date.now());
    fs.timer = setTimeout(() => {
      fs.timer = 0;
      loadFailures();
    }, wait);
  }

  // ---- Live updates ---------------------------------------------------
  function openStream() {
    if (typeof EventSource !== 'function') {
      if (!isFinal(st.b.status)) startPolling();
      return;
    }
    const es = new EventSource(`${base}/events`);
    ctx.cleanup(() => es.close());
    es.addEventListener('state', (ev) => {
      let d;
      try {
        d = JSON.parse(ev.data);
      } catch {
        return; // a malformed event: the next one will do
      }
      if (Array.isArray(d.series)) st.series = d.series;
      if (d.broadcast) update(d.broadcast);
      drawChart();
      // The server closes after the final event; EventSource would then
      // reconnect, so close it first.
      if (d.broadcast && isFinal(d.broadcast.status)) es.close();
    });
    es.addEventListener('error', () => {
      // Whether it could not connect or the connection dropped: poll.
      es.close();
      if (!signal.aborted && !isFinal(st.b.status)) startPolling();
    });
  }

  function startPolling() {
    if (st.polling) return;
    st.polling = true;
    let timer = 0;
    ctx.cleanup(() => clearTimeout(timer));
    const tick = async () => {
      try {
        const b = await get(base, {signal});
        clearPageError();
        sample(b);
        update(b);
        drawChart();
        if (isFinal(b.status)) return;
      } catch (err) {
        if (signal.aborted || err.status === 401) return;
        showPageError(root, new Error('Live updates failed: ' + err.message));
      }
      timer = setTimeout(tick, POLL_MS);
    };
    timer = setTimeout(tick, POLL_MS);
  }

  // Without the stream there is no server series: derive one from the
  // outcome counts between polls.
  function sample(b) {
    const now = Date.now();
    const n = b.succeeded + b.failed;
    if (st.lastSample) {
      const dt = (now - st.lastSample.at) / 1000;
      if (dt > 0) st.series = [...st.series, {at: new Date(now).toISOString(), per_second: Math.max(0, n - st.lastSample.n) / dt}].slice(-120);
    }
    st.lastSample = {at: now, n};
  }

  st.lastSample = {at: Date.now(), n: first.succeeded + first.failed}; // polling derives rates from here
  update(first);
  drawChart();
  await loadFailures();
  // Even a final broadcast gets one stream: its last event carries the
  // series of its last seconds.
  openStream();
}

function paceLine(b, series) {
  const parts = [];
  const last = series[series.length - 1];
  if (b.status === 'running' && last) parts.push(`Now ${perSecond(last.per_second)}. `);
  if (b.max_rate != null) parts.push(`Limited to ${perSecond(b.max_rate)}. `);
  if (b.deliver_over) parts.push(`Spread over ${b.deliver_over}. `);
  if (b.expected_finish_at && !isFinal(b.status)) parts.push('Expected to finish ', timeEl(b.expected_finish_at), '. ');
  if (b.duration_ms != null) parts.push(`${isFinal(b.status) ? 'Took' : 'Running for'} ${duration(b.duration_ms)}.`);
  return parts;
}

function audienceText(a) {
  if (!a) return '—';
  if (a.all) return 'All users';
  if (a.user_ids) {
    const shown = a.user_ids.slice(0, 20).join(', ');
    return `${num(a.user_ids.length)} user id${a.user_ids.length === 1 ? '' : 's'}: ${shown}${a.user_ids.length > 20 ? ', …' : ''}`;
  }
  if (a.name) {
    const p = Object.entries(a.params || {}).map(([k, v]) => `${k}=${Array.isArray(v) ? v.join(',') : v}`);
    return p.length ? `${a.name} (${p.join(', ')})` : a.name;
  }
  if (a.segment) {
    // The version it was sent to, as it was then (a later edit of the
    // segment does not change it).
    const sg = a.segment;
    return h('div', {id: 'broadcast-segment', 'data-segment': sg.name, 'data-version': sg.version},
      'Segment ', h('a', {href: `#/segments/${encodeURIComponent(sg.name)}`}, sg.name), ` (version ${sg.version})`,
      sg.filter ? describe(h, sg.filter) : null);
  }
  if (a.resend_of) {
    return h('span', null, 'Failures of ', h('a', {href: `#/broadcasts/${a.resend_of}`}, `#${a.resend_of}`),
      a.codes?.length ? ` with ${a.codes.join(', ')}` : '');
  }
  return JSON.stringify(a);
}

function messageView(b) {
  const m = b.message || {};
  const out = [h('h2', {id: 'msg-h'}, 'Message'),
    defList([
      ['Title', m.title],
      ['Body', m.body ? h('span', {class: 'pre-wrap'}, m.body) : null],
      ['Image', m.image ? h('code', {class: 'break'}, m.image) : null],
    ])];
  if (m.data && Object.keys(m.data).length) {
    out.push(h('h3', null, 'Data'), defList(Object.entries(m.data).map(([k, v]) => [k, h('code', null, v)])));
  }
  if (m.localized && Object.keys(m.localized).length) {
    out.push(h('h3', null, 'Localized'), table(null, ['Locale', 'Title', 'Body'],
      Object.entries(m.localized).map(([l, v]) => h('tr', null, h('td', null, l), h('td', null, v.title || ''), h('td', null, v.body || '')))));
  }
  for (const k of ['android', 'apns', 'webpush', 'fcm_options']) {
    if (m[k]) out.push(h('h3', null, k), h('pre', {class: 'json'}, JSON.stringify(m[k], null, 2)));
  }
  if (m.variants && m.variants.length) {
    out.push(h('h3', null, 'A/B variants'), table({id: 'ab-messages'}, ['Variant', 'Weight', 'Title', 'Body'],
      m.variants.map((v) => h('tr', null, h('td', null, h('code', null, v.name)), h('td', {class: 'num'}, num(v.weight)),
        h('td', null, v.title || ''), h('td', null, v.body || '')))));
  } else if (!m.title && !m.body && !m.data) out.push(h('p', {class: 'muted'}, 'No text.'));
  return out;
}

// A count with its value in data-value (as the legend's).
function countEl(key, n) {
  return h('strong', {id: 'count-' + key, 'data-value': String(n || 0)}, num(n || 0));
}

// consentRules is the category's rules as the broadcast ran under them,
// in plain words: who had to have consented, the night window, the labels.
function consentRules(c) {
  const who = (rule, what) => {
    if (!rule) return null;
    if (rule === 'table') return `users who gave their ${what} (the consent table)`;
    return h('span', null, `users for whom `, h('code', null, rule), ` holds`);
  };
  const night = c.night ? windowText(c.night.window) : '';
  const items = [
    c.consent ? h('span', null, 'Sent only to ', who(c.consent, 'consent')) : 'No consent needed beyond notifications being on',
    c.night ? (c.night.consent
      ? h('span', null, `Between ${night} in each user's zone, sent only to `, who(c.night.consent, 'night consent'), '; the others when the window ended')
      : `Between ${night} in each user's zone, nobody: sends waited for the window's end`) : null,
    c.title_prefix ? h('span', null, 'Titles start with ', h('code', {class: 'pre-wrap'}, c.title_prefix)) : null,
    c.body_suffix ? h('span', null, 'Bodies end with ', h('code', {class: 'pre-wrap'}, c.body_suffix)) : null,
    c.frequency_cap ? `Frequency cap: ${c.frequency_cap}` : null,
    c.quiet_hours ? `Quiet hours ${windowText(c.quiet_hours)} by default` : null,
  ].filter(Boolean);
  return h('ul', {id: 'broadcast-consent', class: 'plain', 'data-category': c.name}, items.map((i) => h('li', null, i)));
}

function detailsView(b) {
  const link = (n) => h('a', {href: `#/broadcasts/${n}`}, `#${n}`);
  const variants = b.variants && Object.keys(b.variants).length
    ? Object.entries(b.variants).map(([k, v]) => `${k}: ${num(v)}`).join(', ') : null;
  const chunks = b.chunks
    ? `${num(b.chunks.chunks)} chunks, ${num(b.chunks.claims)} claims, ${num(b.chunks.takeovers)} takeovers` +
      (b.chunks.done_by ? ` (${Object.entries(b.chunks.done_by).map(([k, v]) => `${k}: ${v}`).join(', ')})` : '')
    : null;
  return [h('h2', {id: 'details-h'}, 'Details'),
    b.error ? h('p', {class: 'alert'}, b.error) : null,
    defList([
      ['App', apps.several() && b.app ? h('span', {id: 'broadcast-app', 'data-app': b.app}, b.app) : null],
      ['Trigger', b.job_name ? `${b.trigger} (job ${b.job_name})` : b.trigger],
      ['Created by', b.created_by],
      ['Audience', audienceText(b.audience)],
      ['Category', b.category != null ? h('span', {id: 'broadcast-category'}, b.category) : null],
      ['Consent rules', b.consent ? consentRules(b.consent) : null],
      [t('watch.dryRun.label'), dryRunText(b)],
      ['Class', b.class],
      ['Frequency cap', b.frequency_cap || 'none'],
      ['Pace', [b.max_rate != null ? perSecond(b.max_rate) : '', b.deliver_over ? `over ${b.deliver_over}` : ''].filter(Boolean).join(', ') || 'as fast as allowed'],
      ['Resend of', b.parent_id ? link(b.parent_id) : null],
      ['Created', timeEl(b.created_at)],
      ['Fire time', b.fire_time ? timeEl(b.fire_time) : null],
      ['Send at', b.send_at ? timeEl(b.send_at) : null],
      ['Users\' local time', b.send_at_local],
      ['Quiet hours', b.quiet_hours ? `${b.quiet_hours.start}–${b.quiet_hours.end}` : null],
      ['Starts at', b.starts_at ? timeEl(b.starts_at) : null],
      ['Hold expires', b.hold_expires_at ? timeEl(b.hold_expires_at) : null],
      ['Released', b.released_at ? h('span', null, timeEl(b.released_at), b.released_by ? ` by ${b.released_by}` : '') : null],
      ['Canceled by', b.canceled_by || null],
      ['Started', timeEl(b.started_at)],
      ['Finished', timeEl(b.finished_at)],
      ['Expected finish', b.expected_finish_at ? timeEl(b.expected_finish_at) : null],
      ['Duration', b.duration_ms != null ? duration(b.duration_ms) : null],
      ['Invalidated tokens', num(b.invalidated_tokens)],
      ['Deferred (quiet hours)', b.deferred != null ? num(b.deferred) : null],
      ['Left out: no consent', b.category != null ? countEl('excluded_no_consent', b.excluded_no_consent) : null],
      ['Deferred by the night window', b.consent?.night ? h('span', null, countEl('night_deferred', b.night_deferred),
        b.night_deferred ? (isFinal(b.status) ? ' (held until the window ended in their zone)' : ' (waiting for the window to end in their zone)') : '') : null],
      ['Unknown zones', b.zone_fallbacks ? num(b.zone_fallbacks) : null],
      ['Variants sent', variants],
      ['Chunks', chunks],
      ['Request id', b.request_id ? h('code', null, b.request_id) : null],
    ])];
}
