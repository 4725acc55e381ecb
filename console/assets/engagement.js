// Engagement on the watch page: what the apps reported after FCM accepted
// the sends (POST /v1/events): the funnel accepted → received → opened →
// clicked, the opens over time, and A/B variants side by side.
//
// "Accepted by FCM" is the broadcast's succeeded count as the page's live
// source (its event stream, or its poll) has it: update(b) is called in
// the same tick as Progress, so the two cards never disagree. The app
// reports (received, opened, clicked) are not in the stream: they and the
// opens series (GET .../engagement?bucket=1m) are read on open and every
// REFRESH_MS while the page is open, as events keep coming after a
// broadcast ends.

import {get} from './api.js';
import {h, s, fill, table, emptyRow} from './dom.js';
import {num, percent} from './format.js';
import {lineChart} from './chart.js';
import {t} from './i18n.js';

const REFRESH_MS = 10000;

// engagementCard returns {el, update(b)} and keeps the reports current.
export function engagementCard(ctx, base) {
  const {signal} = ctx;
  const funnel = h('ol', {id: 'funnel', class: 'funnel'});
  const times = h('p', {id: 'time-to-open', class: 'muted'});
  const chart = s('svg', {id: 'opens-chart', class: 'chart', role: 'img', 'aria-label': t('engagement.opensPerMinute')});
  const variants = h('div', {id: 'ab-variants'});
  const el = h('section', {class: 'card', 'aria-labelledby': 'engagement-h'},
    h('h2', {id: 'engagement-h'}, t('engagement.heading')),
    h('p', {class: 'hint'}, t('engagement.hint')),
    funnel, times,
    h('h3', null, t('engagement.opensPerMinute')), chart,
    variants);
  // succeeded: the live source's; e: the apps' reports, last read.
  const st = {succeeded: null, e: null, key: ''};
  const draw = () => {
    if (st.succeeded == null) return;
    const e = st.e || {received: 0, opened: 0, clicked: 0, dismissed: 0};
    const key = JSON.stringify([st.succeeded, e]);
    if (key === st.key) return;
    st.key = key;
    const accepted = st.succeeded;
    const steps = [['accepted', accepted], ['received', e.received], ['opened', e.opened], ['clicked', e.clicked]];
    fill(funnel, ...steps.map(([k, n]) => {
      const share = accepted ? n / accepted : 0;
      const bar = h('span');
      bar.style.width = Math.min(100, share * 100) + '%'; // CSSOM: the CSP refuses style attributes
      return h('li', {class: 'funnel-step', 'data-step': k},
        h('span', {class: 'funnel-label'}, t(`engagement.step.${k}`)),
        h('span', {class: 'funnel-bar', 'aria-hidden': 'true'}, bar),
        h('strong', {id: 'funnel-' + k, 'data-value': String(n)}, num(n)),
        h('span', {class: 'muted'}, k === 'accepted' ? '' : percent(share)));
    }));
    fill(times, e.time_to_open_p50_s == null ? t('engagement.noOpens')
      : t('engagement.timeToOpen', {p50: secs(e.time_to_open_p50_s), p90: secs(e.time_to_open_p90_s)}));
    fill(variants, ...(e.variants ? [h('h3', null, t('engagement.variants')), abTable(e.variants)] : []));
  };
  let timer = 0;
  ctx.cleanup(() => clearTimeout(timer));
  const load = async () => {
    try {
      const [b, series] = await Promise.all([get(base, {signal}), get(`${base}/engagement?bucket=1m`, {signal})]);
      if (signal.aborted) return;
      // Only the reports: the accepted count stays the live source's.
      st.e = b.engagement || st.e;
      draw();
      const points = (series.points || []).map((p) => ({at: p.at, per_second: p.opened}));
      lineChart(chart, points, {empty: t('engagement.noOpensChart')});
      chart.setAttribute('aria-label', points.length
        ? t('engagement.opensLast', {count: points[points.length - 1].per_second}) : t('engagement.opensPerMinute'));
    } catch (err) {
      if (signal.aborted || err.status === 401) return;
      fill(times, t('engagement.loadError', {error: err.message}));
    }
    timer = setTimeout(load, REFRESH_MS);
  };
  load();
  return {
    el,
    // update takes the live broadcast: its succeeded count, and its
    // reports when it carries them (a poll's GET does, the stream not).
    update(b) {
      st.succeeded = b.succeeded;
      if (b.engagement) st.e = b.engagement;
      draw();
    },
  };
}

function abTable(vs) {
  const rows = vs.map((v, i) => h('tr', {'data-variant': v.name},
    h('td', null, h('code', null, v.name)),
    h('td', {class: 'num'}, num(v.sent)),
    h('td', {class: 'num'}, num(v.opened)),
    h('td', {class: 'num'}, num(v.clicked)),
    h('td', {class: 'num open-rate'}, percent(v.open_rate)),
    h('td', {class: 'num diff'}, i === 0 ? t('engagement.ab.baseline') : v.open_rate_diff == null ? '—'
      : t('engagement.ab.diff', {diff: signed(v.open_rate_diff), low: signed(v.open_rate_diff_ci95[0]), high: signed(v.open_rate_diff_ci95[1])}))));
  return table({id: 'ab-table'}, [t('engagement.ab.variant'), t('engagement.ab.sent'), t('engagement.ab.opened'),
    t('engagement.ab.clicked'), t('engagement.ab.openRate'), t('engagement.ab.against')],
  rows.length ? rows : emptyRow(6, t('engagement.ab.none')));
}

const signed = (x) => (x >= 0 ? '+' : '−') + t('engagement.points', {n: (Math.abs(x) * 100).toFixed(1)});

function secs(v) {
  if (v < 90) return t('engagement.seconds', {n: Math.round(v)});
  if (v < 5400) return t('engagement.minutes', {n: Math.round(v / 60)});
  return t('engagement.hours', {n: (v / 3600).toFixed(1)});
}
