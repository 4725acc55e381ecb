// Watch one broadcast live (#/broadcasts/ID).
//
// The live state comes from the server's event stream (one `state` event
// a second with the broadcast and its send-rate series: the last two
// minutes while it runs, its whole run once it is final); if the stream
// fails the page polls every 2 s instead. Every card that shows a count
// (Progress, Engagement) is fed from that one source, in the same update,
// so they never disagree. The failures table reloads when `failed`
// changes, at most every 3 s. Actions are rendered only for senders and
// only while the status allows them. With several apps, the page names
// the broadcast's app. A broadcast in a message category shows it, the
// category's rules as it ran under them (its proof of consent, unchanged
// by a later edit of the configuration), and the devices its consent left
// out or its night window deferred.

import {get, post, may} from './api.js';
import {h, s, badge, showPageError, clearPageError, isQuiet, confirmDialog, fill, add} from './dom.js';
import {num, duration, perSecond, timeEl, isFinal} from './format.js';
import {lineChart} from './chart.js';
import {headline, audienceSize} from './broadcasts.js';
import {engagementCard} from './engagement.js';
import {broadcastDeliveries} from './webhooks.js';
import {messageView, detailsView} from './watchdetails.js';
import {codesCard, failuresCard, explain, listsOutcomes} from './watchfailures.js';
import {testForm} from './watchtest.js';
import {t, tOr} from './i18n.js';
import * as apps from './apps.js';
import {scheduleCard} from './schedule.js';

// What POST .../resend resends by default (the transient codes).
const TRANSIENT = ['UNAVAILABLE', 'INTERNAL', 'QUOTA_EXCEEDED', 'TIMEOUT', 'NETWORK_ERROR'];
const CANCELABLE = new Set(['scheduled', 'held', 'planning', 'queued', 'running']);
// capped: withheld by a frequency cap, an outcome beside the others.
const SEGMENTS = ['succeeded', 'failed', 'canceled', 'capped', 'waiting'];
const POLL_MS = 2000;
// How long after a plan's end its count of users may still land: the
// count itself, or the sweep's recount of a lost one (usersLate, about
// 3 minutes by default, then a sweep a minute, then the count).
const USERS_WINDOW_MS = 10 * 60 * 1000;

export async function render(ctx) {
  const {root, signal} = ctx;
  const id = ctx.params[0];
  const sender = may('sender');
  const base = `/push/broadcasts/${id}`;

  add(root, h('h1', {tabindex: '-1'}, t('watch.heading', {id})));
  const first = await get(base, {signal});
  if (signal.aborted) return;

  const st = {b: null, series: [], actionsKey: '', detailsKey: '', codesKey: '', polling: false, lastSample: null, failedSeen: first.failed};

  // ---- Skeleton -------------------------------------------------------
  const status = badge(first.status, 'watch-status');
  const dryTag = h('span', {class: 'tag', hidden: true}, t('watch.dryRunTag'));
  const subtitle = h('p', {class: 'subtitle'});
  const actions = h('div', {class: 'actions', id: 'actions'});
  // Every kept target's outcome as CSV (GET /push/broadcasts/{id}/outcomes),
  // for any role, once the broadcast is final.
  const download = h('a', {id: 'btn-outcomes', class: 'btn', hidden: true, href: `${base}/outcomes?format=csv`, download: `broadcast-${id}-outcomes.csv`}, t('watch.downloadOutcomes'));
  const actionError = h('p', {id: 'action-error', class: 'alert', role: 'alert', hidden: true});

  const segs = {};
  const counts = {};
  const progress = h('div', {id: 'progress', class: 'progress', role: 'progressbar', 'aria-valuemin': '0'},
    SEGMENTS.map((k) => (segs[k] = h('div', {class: ['seg', 'seg-' + k]}))));
  const count = (k) => h('li', null, h('span', {class: ['swatch', 'swatch-' + k], 'aria-hidden': 'true'}),
    t(`watch.count.${k}`), ' ', (counts[k] = h('strong', {id: 'count-' + k, 'data-value': '0'}, '0')));
  const legend = h('ul', {class: 'legend'}, ['targeted', 'succeeded', 'failed', 'canceled', 'capped', 'waiting', 'pending'].map(count));
  const pace = h('p', {class: 'muted'});
  // Who it reaches: its users beside its devices (the bar counts devices).
  // A count that failed for good says so, its reason behind a click.
  const audienceText = h('span');
  const usersReason = h('p', {class: 'muted'});
  const usersFailed = h('details', {id: 'users-not-counted', hidden: true}, h('summary', null, t('watch.usersNotCounted')), usersReason);
  const audience = h('div', {id: 'audience-size', 'data-users': '', 'data-devices': ''}, audienceText, usersFailed);
  // Until the audience is counted (planning, scheduled, held before its
  // count) targeted is null: the bar has nothing to divide by, so it gives
  // way to "counting…" (a bar of a part of the audience would run ahead).
  const counting = h('p', {id: 'progress-counting', class: 'muted', hidden: true}, t('watch.counting'));
  const planning = h('p', {id: 'planning-note', class: 'muted', hidden: true}, t('watch.planningNote'));

  const chart = s('svg', {id: 'rate-chart', class: 'chart', role: 'img', 'aria-label': t('watch.rate.heading')});
  const average = h('p', {id: 'rate-average', class: 'muted', hidden: true});

  const messageCard = h('section', {class: 'card', 'aria-labelledby': 'msg-h'});
  const detailsCard = h('section', {class: 'card', 'aria-labelledby': 'details-h'});
  const codes = codesCard();
  const failures = failuresCard(ctx, id, base);
  const engagement = engagementCard(ctx, base);
  const testCard = h('div');
  // Before it starts: when it goes, and its Edit (schedule.js).
  const schedule = scheduleCard(ctx, base, (b) => update(b));

  add(root,
    h('div', {class: 'title-row'}, status, dryTag, subtitle),
    schedule.el,
    sender ? actions : null,
    h('div', {class: 'actions'}, download),
    actionError,
    h('section', {class: 'card', 'aria-labelledby': 'progress-h'},
      h('h2', {id: 'progress-h'}, t('watch.progress')), progress, counting, audience, legend,
      h('p', {class: 'hint'}, t('watch.devicesHint')), planning, pace),
    testCard,
    h('section', {class: 'card', 'aria-labelledby': 'rate-h'},
      h('h2', {id: 'rate-h'}, t('watch.rate.heading')), chart, average),
    engagement.el,
    h('div', {class: 'grid-2'}, messageCard, detailsCard),
    codes.el,
    failures.el,
    broadcastDeliveries(ctx, id));

  // ---- Updating -------------------------------------------------------
  // usersMayCome: b's count of users can still land: its plan runs, or
  // ended within USERS_WINDOW_MS (a lost count is counted again minutes
  // after the plan's end), and no count failed for good. Else (a held
  // broadcast, one from before the count, one whose count failed) the
  // page shows its devices alone rather than "being counted" for ever.
  function usersMayCome(b) {
    if (b.users_targeted != null || b.users_count_error || isFinal(b.status)) return false;
    if (b.planning || b.status === 'planning') return true;
    return b.planned_at != null && Date.now() - Date.parse(b.planned_at) < USERS_WINDOW_MS;
  }

  function update(b) {
    st.b = b;
    schedule.update(b);
    status.textContent = tOr(`watch.status.${b.status}`, b.status);
    status.className = 'badge badge-' + b.status;
    dryTag.hidden = !b.dry_run;
    const by = b.created_by ? t('watch.byWhom', {who: b.created_by}) : '';
    subtitle.textContent = `${apps.several() && b.app ? b.app + ' · ' : ''}${tOr(`watch.trigger.${b.trigger}`, b.trigger)}${by ? ' ' + by : ''} · ${headline(b)}`;

    const known = b.targeted != null;
    audienceText.textContent = t('watch.audience', {size: audienceSize(b)}) +
      (known && usersMayCome(b) ? ' · ' + t('watch.usersCounting') : '');
    usersFailed.hidden = !(known && b.users_targeted == null && b.users_count_error);
    usersReason.textContent = b.users_count_error ? t('watch.usersNotCountedWhy', {reason: b.users_count_error}) : '';
    audience.dataset.users = b.users_targeted ?? '';
    audience.dataset.devices = b.targeted ?? '';
    planning.hidden = !b.planning;
    progress.hidden = !known;
    counting.hidden = known;
    const waiting = b.waiting || 0;
    const capped = b.capped || 0;
    const done = b.succeeded + b.failed + b.canceled + capped;
    const pending = known ? Math.max(0, b.targeted - done - waiting) : null;
    const values = {targeted: b.targeted, succeeded: b.succeeded, failed: b.failed, canceled: b.canceled, capped, waiting, pending};
    for (const [k, v] of Object.entries(values)) {
      counts[k].textContent = v == null ? t('watch.counting') : num(v);
      counts[k].dataset.value = v == null ? '' : String(v);
    }
    for (const k of SEGMENTS) {
      const pct = known && b.targeted ? (values[k] / b.targeted) * 100 : 0;
      segs[k].style.width = Math.min(100, pct) + '%';
      segs[k].title = `${t(`watch.count.${k}`)}: ${num(values[k])}`;
    }
    if (known) {
      progress.setAttribute('aria-valuemax', String(b.targeted));
      progress.setAttribute('aria-valuenow', String(Math.min(done, b.targeted)));
      progress.setAttribute('aria-valuetext', t('watch.progressText', {succeeded: b.succeeded, failed: b.failed,
        canceled: b.canceled, capped, waiting, pending, targeted: b.targeted}));
    } else {
      progress.removeAttribute('aria-valuemax');
      progress.removeAttribute('aria-valuenow');
      progress.setAttribute('aria-valuetext', t('watch.progressCounting', {done}));
    }
    fill(pace, ...paceLine(b, st.series));
    // The same broadcast, in the same tick, as Progress.
    engagement.update(b);

    const codesKey = JSON.stringify(b.errors || {});
    if (codesKey !== st.codesKey) {
      st.codesKey = codesKey;
      const entries = Object.entries(b.errors || {}).sort((x, y) => y[1] - x[1]);
      codes.update(entries);
      failures.codes(entries);
    }
    const detailsKey = JSON.stringify({...b, succeeded: 0, failed: 0, canceled: 0, capped: 0, waiting: 0, errors: 0, engagement: 0, duration_ms: b.duration_ms == null});
    if (detailsKey !== st.detailsKey || !isFinal(b.status)) {
      st.detailsKey = detailsKey;
      fill(messageCard, ...messageView(b));
      fill(detailsCard, ...detailsView(b));
    }
    // Buttons are rebuilt only when what they offer changes, so focus on
    // one is not lost every second.
    // A named audience whose cursor is not a token id keeps no outcomes by
    // token: its export is a 409 (docs/outcomes.md#named-audiences).
    download.hidden = !isFinal(b.status) || !listsOutcomes(b);
    failures.final(b, isFinal(b.status));
    const actionsKey = `${b.status}|${b.failed > 0}`;
    if (sender && actionsKey !== st.actionsKey) {
      st.actionsKey = actionsKey;
      renderActions(b);
    }
    if (b.failed !== st.failedSeen) {
      st.failedSeen = b.failed;
      failures.changed();
    }
  }

  // drawChart draws the series; a finished broadcast also says its
  // average over the whole run (from the counts and the duration), which
  // is all there is to show for one shorter than the stored samples' step.
  function drawChart() {
    const b = st.b;
    const avg = averageRate(b);
    const final = isFinal(b.status);
    const avgText = avg == null ? '' : t('watch.rate.average', {rate: perSecond(avg), duration: duration(b.duration_ms)});
    average.hidden = !(final && avg != null);
    average.textContent = avgText;
    average.dataset.value = avg == null ? '' : String(avg);
    lineChart(chart, st.series, {empty: final && avg != null ? avgText : t('chart.noSamples')});
    const last = st.series[st.series.length - 1];
    chart.setAttribute('aria-label', final && avg != null ? `${t('watch.rate.heading')}: ${avgText}`
      : last ? t('watch.rate.last', {rate: perSecond(last.per_second)}) : t('watch.rate.heading'));
  }

  // ---- Actions --------------------------------------------------------
  function renderActions(b) {
    const btn = (bid, label, cls, fn) => h('button', {type: 'button', id: bid, class: ['btn', cls], on: {click: fn}}, label);
    fill(actions,
      CANCELABLE.has(b.status) ? btn('btn-cancel', t('watch.action.cancel'), 'btn-danger', onCancel) : null,
      b.status === 'held' && may('approver') ? btn('btn-release', t('watch.action.release'), 'btn-primary', onRelease) : null,
      isFinal(b.status) && b.failed > 0 ? btn('btn-resend', t('watch.action.resend'), '', onResend) : null,
      h('a', {id: 'btn-duplicate', class: 'btn', href: `#/compose?from=${b.id}`}, t('watch.action.duplicate')));
    testCard.replaceChildren();
    if (b.status === 'held') add(testCard, testForm(base, signal));
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
      title: t('watch.cancel.title', {id}),
      body: t('watch.cancel.body'),
      ok: t('watch.cancel.ok'),
    });
    if (ok) await act(button, async () => update(await post(`${base}/cancel`, {}, {signal})));
  }

  async function onRelease(ev) {
    const button = ev.currentTarget; // gone from the event after the await
    const b = st.b;
    const to = b.targeted == null ? t('watch.release.counting') : t('watch.release.devices', {count: b.targeted});
    const ok = await confirmDialog({
      title: t('watch.release.title', {id}),
      body: b.send_at ? t('watch.release.bodyAt', {to}) : t('watch.release.bodyNow', {to}),
      ok: t('watch.action.release'),
    });
    if (ok) await act(button, async () => update(await post(`${base}/release`, {}, {signal})));
  }

  async function onResend(ev) {
    const button = ev.currentTarget; // gone from the event after the await
    const errCodes = Object.keys(st.b.errors || {}).sort();
    const preset = errCodes.filter((c) => TRANSIENT.includes(c));
    const boxes = errCodes.map((c) => {
      const input = h('input', {type: 'checkbox', id: `resend-code-${c}`, value: c, checked: preset.includes(c)});
      return h('div', {class: 'field field-check'}, input, h('label', {for: input.id}, `${explain(c)} (${c}, ${num(st.b.errors[c])})`));
    });
    const body = h('div', null,
      h('p', null, t('watch.resend.intro', {id})),
      h('fieldset', {class: 'plain'}, h('legend', null, t('watch.resend.codes')), boxes),
      h('p', {class: 'hint'}, t('watch.resend.hint', {codes: TRANSIENT.join(', ')})));
    const ok = await confirmDialog({title: t('watch.resend.title', {id}), body, ok: t('watch.resend.ok')});
    if (!ok) return;
    const chosen = boxes.map((x) => x.querySelector('input')).filter((i) => i.checked).map((i) => i.value);
    // The preset is what the server does with {} anyway.
    const same = chosen.length === preset.length && chosen.every((c) => preset.includes(c));
    const req = same || !chosen.length ? {} : {codes: chosen};
    await act(button, async () => {
      const nb = await post(`${base}/resend?wait=0`, req, {signal});
      location.hash = `#/broadcasts/${nb.id}`;
    });
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
        showPageError(root, new Error(t('watch.liveFailed', {error: err.message})));
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
  await failures.load();
  // Even a final broadcast gets one stream: its last event carries the
  // series of its whole run.
  openStream();
}

// averageRate is a broadcast's sends (succeeded + failed) a second over
// its run, or null before it has a duration or a send.
function averageRate(b) {
  const n = b.succeeded + b.failed;
  if (!b.duration_ms || !n) return null;
  return n / (b.duration_ms / 1000);
}

function paceLine(b, series) {
  const parts = [];
  const last = series[series.length - 1];
  if (b.status === 'running' && last) parts.push(t('watch.pace.now', {rate: perSecond(last.per_second)}), ' ');
  if (b.max_rate != null) parts.push(t('watch.pace.limited', {rate: perSecond(b.max_rate)}), ' ');
  if (b.deliver_over) parts.push(t('watch.pace.spread', {over: b.deliver_over}), ' ');
  if (b.expected_finish_at && !isFinal(b.status)) parts.push(t('watch.pace.expected'), ' ', timeEl(b.expected_finish_at), '. ');
  if (b.duration_ms != null) parts.push(isFinal(b.status) ? t('watch.pace.took', {duration: duration(b.duration_ms)}) : t('watch.pace.running', {duration: duration(b.duration_ms)}));
  return parts;
}

