// Dashboard: the all-time totals from /push/stats, and the success and open
// rates of the last 20 real (not dry-run) broadcasts; of the chosen app
// when there are several.

import {get, qs} from './api.js';
import * as apps from './apps.js';
import {h, s, table, emptyRow, showPageError, isQuiet, add} from './dom.js';
import {num, percent} from './format.js';
import {barChart} from './chart.js';

export async function render(ctx) {
  const {root, signal} = ctx;
  add(root, h('h1', {tabindex: '-1'}, 'Dashboard'));

  // Both at once; each part shows what it got, a failure only its own box.
  const [stats, page] = await Promise.allSettled([
    get('/push/stats' + qs({app: apps.current()}), {signal}),
    get('/push/broadcasts' + qs({limit: 50, app: apps.current()}), {signal}),
  ]);
  if (signal.aborted) return;

  const grid = h('div', {class: 'dash-grid'});
  add(root, grid);

  if (stats.status === 'fulfilled') add(grid, statsCards(stats.value), errorCodes(stats.value.errors));
  else if (!isQuiet(stats.reason)) showPageError(root, stats.reason);

  if (page.status === 'fulfilled') {
    const chart = rateChart(page.value.broadcasts || []);
    const opens = openRateChart(page.value.broadcasts || []);
    add(grid, chart.el, opens.el);
    chart.draw(); // once in the page, so the chart can measure its width
    opens.draw();
  }
  else if (!isQuiet(page.reason) && stats.status === 'fulfilled') showPageError(root, page.reason);
}

function statsCards(st) {
  const card = (id, label, value, extra) => h('div', {class: ['stat', 'stat-' + id]},
    h('span', {class: 'stat-label'}, label),
    h('strong', {class: 'stat-value', id: 'stat-' + id, 'data-value': value ?? 0}, num(value ?? 0)),
    extra ? h('span', {class: 'stat-extra'}, extra) : null);
  return h('section', {class: 'card span-all', 'aria-labelledby': 'totals-h'},
    h('h2', {id: 'totals-h'}, 'Totals'),
    h('div', {class: 'stats'},
      card('broadcasts', 'Broadcasts', st.broadcasts, `${num(st.dry_runs ?? 0)} dry runs`),
      card('targeted', 'Targeted', st.targeted),
      card('succeeded', 'Succeeded', st.succeeded),
      card('failed', 'Failed', st.failed),
      card('canceled', 'Canceled', st.canceled),
      card('capped', 'Capped', st.capped),
      card('invalidated', 'Invalidated tokens', st.invalidated_tokens),
      card('opened', 'Opened', st.opened, `${num(st.clicked ?? 0)} clicked`)));
}

function errorCodes(errors) {
  const rows = Object.entries(errors || {}).sort((a, b) => b[1] - a[1])
    .map(([code, n]) => h('tr', {'data-code': code}, h('td', null, h('code', null, code)), h('td', {class: 'num'}, num(n))));
  return h('section', {class: 'card', 'aria-labelledby': 'codes-h'},
    h('h2', {id: 'codes-h'}, 'Error codes'),
    table({id: 'stats-errors'}, ['Code', 'Targets'], rows.length ? rows : emptyRow(2, 'No errors so far.')));
}

// rateChart: succeeded ÷ (succeeded + failed) of the last 20 real
// broadcasts.
function rateChart(broadcasts) {
  return recentChart(broadcasts, {
    id: 'success-chart', head: 'rate-h', title: 'Success rate, last 20 broadcasts', aria: 'Success rate of the last broadcasts',
    hint: 'Succeeded ÷ (succeeded + failed), dry runs left out; oldest on the left. Each bar opens its broadcast.',
    rate: (b) => {
      const done = b.succeeded + b.failed;
      return done ? [b.succeeded / done, `of ${num(done)} succeeded`] : [null, `no outcomes yet (${b.status})`];
    },
  });
}

// openRateChart: opened ÷ succeeded of the last 20 real broadcasts, as the
// apps reported them (POST /v1/events).
function openRateChart(broadcasts) {
  return recentChart(broadcasts, {
    id: 'open-rate-chart', head: 'open-rate-h', title: 'Open rate, last 20 broadcasts', aria: 'Open rate of the last broadcasts',
    hint: 'Opened ÷ succeeded, as the apps reported (POST /v1/events); oldest on the left. Each bar opens its broadcast.',
    rate: (b) => (b.succeeded ? [(b.engagement?.opened ?? 0) / b.succeeded, `of ${num(b.succeeded)} opened`] : [null, `nothing accepted yet (${b.status})`]),
  });
}

// recentChart is a card with a bar a broadcast (the last 20 real ones,
// oldest on the left), each bar's value and words from o.rate.
function recentChart(broadcasts, o) {
  // Newest first from the API; the chart reads left (older) to right.
  const recent = broadcasts.filter((b) => !b.dry_run).slice(0, 20).reverse();
  const bars = recent.map((b) => {
    const [value, words] = o.rate(b);
    const title = b.message?.title ? ` “${b.message.title}”` : '';
    return {id: b.id, href: `#/broadcasts/${b.id}`, value,
      label: `Broadcast ${b.id}${title}: ` + (value == null ? words : `${percent(value)} ${words}`)};
  });
  const svg = s('svg', {id: o.id, class: 'chart', role: 'group', 'aria-label': o.aria});
  const body = bars.length ? svg : h('p', {class: 'muted'}, 'No broadcasts yet.');
  const el = h('section', {class: 'card', 'aria-labelledby': o.head},
    h('h2', {id: o.head}, o.title), h('p', {class: 'hint'}, o.hint), body);
  return {el, draw: () => bars.length && barChart(svg, bars)};
}
