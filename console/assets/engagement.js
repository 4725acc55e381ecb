// Engagement on the watch page: what the apps reported after FCM accepted
// the sends (POST /v1/events): the funnel accepted → received → opened →
// clicked, the opens over time, and A/B variants side by side.
//
// It reads the broadcast (its engagement) and the series
// (GET .../engagement?bucket=1m) on open and every REFRESH_MS while the
// page is open: events keep coming after a broadcast ends.

import {get} from './api.js';
import {h, s, fill, table, emptyRow} from './dom.js';
import {num, percent} from './format.js';
import {lineChart} from './chart.js';

const REFRESH_MS = 10000;

// engagementCard returns the card and starts keeping it current.
export function engagementCard(ctx, base) {
  const {signal} = ctx;
  const funnel = h('ol', {id: 'funnel', class: 'funnel'});
  const times = h('p', {id: 'time-to-open', class: 'muted'});
  const chart = s('svg', {id: 'opens-chart', class: 'chart', role: 'img', 'aria-label': 'Opens per minute'});
  const variants = h('div', {id: 'ab-variants'});
  const card = h('section', {class: 'card', 'aria-labelledby': 'engagement-h'},
    h('h2', {id: 'engagement-h'}, 'Engagement'),
    h('p', {class: 'hint'}, 'Distinct targets the apps reported, of those FCM accepted.'),
    funnel, times,
    h('h3', null, 'Opens per minute'), chart,
    variants);
  let timer = 0;
  ctx.cleanup(() => clearTimeout(timer));
  const load = async () => {
    try {
      const [b, series] = await Promise.all([get(base, {signal}), get(`${base}/engagement?bucket=1m`, {signal})]);
      if (signal.aborted) return;
      draw(b, series);
    } catch (err) {
      if (signal.aborted || err.status === 401) return;
      fill(times, 'Engagement could not be read: ' + err.message);
    }
    timer = setTimeout(load, REFRESH_MS);
  };
  const draw = (b, series) => {
    const e = b.engagement || {received: 0, opened: 0, clicked: 0, dismissed: 0};
    const steps = [['accepted', 'Accepted by FCM', b.succeeded], ['received', 'Received', e.received],
      ['opened', 'Opened', e.opened], ['clicked', 'Clicked', e.clicked]];
    fill(funnel, ...steps.map(([k, label, n]) => {
      const share = b.succeeded ? n / b.succeeded : 0;
      const bar = h('span');
      bar.style.width = Math.min(100, share * 100) + '%'; // CSSOM: the CSP refuses style attributes
      return h('li', {class: 'funnel-step', 'data-step': k},
        h('span', {class: 'funnel-label'}, label),
        h('span', {class: 'funnel-bar', 'aria-hidden': 'true'}, bar),
        h('strong', {id: 'funnel-' + k, 'data-value': String(n)}, num(n)),
        h('span', {class: 'muted'}, k === 'accepted' ? '' : percent(share)));
    }));
    fill(times, e.time_to_open_p50_s == null ? 'No opens yet.'
      : `Time to open: median ${secs(e.time_to_open_p50_s)}, 90 % within ${secs(e.time_to_open_p90_s)}.`);
    const points = (series.points || []).map((p) => ({at: p.at, per_second: p.opened}));
    lineChart(chart, points);
    chart.setAttribute('aria-label', `Opens per minute${points.length ? ': ' + num(points[points.length - 1].per_second) + ' in the last minute' : ''}`);
    fill(variants, ...(e.variants ? [h('h3', null, 'A/B variants'), abTable(e.variants)] : []));
  };
  load();
  return card;
}

function abTable(vs) {
  const rows = vs.map((v, i) => h('tr', {'data-variant': v.name},
    h('td', null, h('code', null, v.name)),
    h('td', {class: 'num'}, num(v.sent)),
    h('td', {class: 'num'}, num(v.opened)),
    h('td', {class: 'num'}, num(v.clicked)),
    h('td', {class: 'num open-rate'}, percent(v.open_rate)),
    h('td', {class: 'num diff'}, i === 0 ? 'baseline' : v.open_rate_diff == null ? '—'
      : `${signed(v.open_rate_diff)} (95 % CI ${signed(v.open_rate_diff_ci95[0])} to ${signed(v.open_rate_diff_ci95[1])})`)));
  return table({id: 'ab-table'}, ['Variant', 'Sent', 'Opened', 'Clicked', 'Open rate', 'Against the first'],
    rows.length ? rows : emptyRow(6, 'No variants.'));
}

const signed = (x) => (x >= 0 ? '+' : '−') + (Math.abs(x) * 100).toFixed(1) + ' pts';

function secs(v) {
  if (v < 90) return `${Math.round(v)} s`;
  if (v < 5400) return `${Math.round(v / 60)} min`;
  return `${(v / 3600).toFixed(1)} h`;
}
