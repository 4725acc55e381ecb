// Dashboard: the all-time totals from /push/stats, and three charts of the
// last 20 real (not dry-run) broadcasts, of the chosen app when there are
// several: reach (succeeded ÷ targeted: how much of the audience got it,
// so a broadcast canceled early is a short bar), success rate (succeeded
// ÷ attempted: of what was sent, how much FCM accepted) and open rate
// (opened ÷ succeeded). Each bar names its broadcast and its values in a
// tooltip; its colour says how good the value is, a zero is grey.

import {get, qs} from './api.js';
import * as apps from './apps.js';
import {h, s, table, emptyRow, showPageError, isQuiet, add} from './dom.js';
import {num, percent} from './format.js';
import {barChart} from './chart.js';
import {explain} from './watchfailures.js';
import {audienceSize} from './broadcasts.js';
import {t, tOr} from './i18n.js';

export async function render(ctx) {
  const {root, signal} = ctx;
  add(root, h('h1', {tabindex: '-1'}, t('dashboard.heading')));

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
    // Newest first from the API; the charts read left (older) to right.
    const recent = (page.value.broadcasts || []).filter((b) => !b.dry_run).slice(0, 20).reverse();
    if (!recent.length) {
      add(grid, h('section', {id: 'charts-empty', class: 'card span-all'},
        h('h2', null, t('dashboard.charts.emptyHeading')),
        h('p', {class: 'muted'}, t('dashboard.charts.empty')),
        h('a', {class: 'btn btn-primary', href: '#/compose'}, t('dashboard.charts.compose'))));
    } else {
      const charts = [reachChart(recent), rateChart(recent), openRateChart(recent)];
      add(grid, ...charts.map((c) => c.el));
      charts.forEach((c) => c.draw()); // once in the page, so a chart can measure its width
    }
  }
  else if (!isQuiet(page.reason) && stats.status === 'fulfilled') showPageError(root, page.reason);
}

function statsCards(st) {
  const card = (id, value, extra) => h('div', {class: ['stat', 'stat-' + id]},
    h('span', {class: 'stat-label'}, t(`dashboard.stat.${id}`)),
    h('strong', {class: 'stat-value', id: 'stat-' + id, 'data-value': value ?? 0}, num(value ?? 0)),
    extra ? h('span', {class: 'stat-extra'}, extra) : null);
  return h('section', {class: 'card span-all', 'aria-labelledby': 'totals-h'},
    h('h2', {id: 'totals-h'}, t('dashboard.totals')),
    h('p', {class: 'hint'}, t('dashboard.totalsHint')),
    h('div', {class: 'stats'},
      card('broadcasts', st.broadcasts, t('dashboard.dryRuns', {count: st.dry_runs ?? 0})),
      card('targeted', st.targeted),
      card('succeeded', st.succeeded),
      card('failed', st.failed),
      card('canceled', st.canceled),
      card('capped', st.capped),
      card('invalidated', st.invalidated_tokens),
      card('opened', st.opened, t('dashboard.clicked', {count: st.clicked ?? 0}))));
}

function errorCodes(errors) {
  const rows = Object.entries(errors || {}).sort((a, b) => b[1] - a[1])
    .map(([code, n]) => h('tr', {'data-code': code},
      h('td', {class: 'wrap'}, h('span', {class: 'code-words'}, explain(code)), ' ', h('code', {class: 'muted'}, code)),
      h('td', {class: 'num'}, num(n))));
  return h('section', {class: 'card', 'aria-labelledby': 'codes-h'},
    h('h2', {id: 'codes-h'}, t('dashboard.codes.heading')),
    table({id: 'stats-errors'}, [t('dashboard.codes.what'), t('dashboard.codes.devices')],
      rows.length ? rows : emptyRow(2, t('dashboard.codes.none'))));
}

// The three ratios of a broadcast, each null when there is nothing to
// divide by yet.
function ratios(b) {
  const done = b.succeeded + b.failed;
  return {
    reach: b.targeted ? b.succeeded / b.targeted : null,
    success: done ? b.succeeded / done : null,
    open: b.succeeded ? (b.engagement?.opened ?? 0) / b.succeeded : null,
  };
}

// A ratio's colour by what it means: most is good, half is fair, less
// is poor, nothing is grey (never green).
function tone(v) {
  if (v == null || v === 0) return 'zero';
  if (v >= 0.9) return 'good';
  if (v >= 0.5) return 'fair';
  return 'poor';
}

// label is a bar's tooltip: the broadcast and its values.
function label(b) {
  const r = ratios(b);
  const part = (v, key, n, of) => (v == null ? t(`dashboard.bar.${key}None`) : t(`dashboard.bar.${key}`, {rate: percent(v), n, of}));
  const title = b.message?.title ? ` “${b.message.title}”` : '';
  return [
    t('dashboard.bar.broadcast', {id: b.id, title, status: tOr(`watch.status.${b.status}`, b.status)}),
    audienceSize(b),
    part(r.reach, 'reach', b.succeeded, b.targeted ?? 0),
    part(r.success, 'success', b.succeeded, b.succeeded + b.failed),
    part(r.open, 'open', b.engagement?.opened ?? 0, b.succeeded),
  ].join(' · ');
}

function reachChart(recent) {
  return recentChart(recent, {id: 'reach-chart', key: 'reach', value: (b) => ratios(b).reach, tone});
}

function rateChart(recent) {
  return recentChart(recent, {id: 'success-chart', key: 'success', value: (b) => ratios(b).success, tone});
}

// An open rate has no "good" line: any opens are blue, none grey.
function openRateChart(recent) {
  return recentChart(recent, {id: 'open-rate-chart', key: 'open', value: (b) => ratios(b).open, tone: (v) => (v ? 'info' : 'zero')});
}

// recentChart is a card with a bar a broadcast, its value over it, its
// id under it, and the legend of its colours.
function recentChart(recent, o) {
  const bars = recent.map((b) => {
    const value = o.value(b);
    return {id: b.id, href: `#/broadcasts/${b.id}`, value, tone: o.tone(value), axis: `#${b.id}`, label: label(b)};
  });
  const head = `${o.id}-h`;
  const svg = s('svg', {id: o.id, class: 'chart', role: 'group', 'aria-labelledby': head});
  const legend = o.key === 'open' ? null : h('ul', {class: 'chart-legend'},
    ['good', 'fair', 'poor', 'zero'].map((k) => h('li', null,
      h('span', {class: ['swatch', 'swatch-' + k], 'aria-hidden': 'true'}), ' ', t(`dashboard.legend.${k}`))));
  const el = h('section', {class: 'card', 'aria-labelledby': head},
    h('h2', {id: head}, t(`dashboard.chart.${o.key}.title`)),
    h('p', {class: 'hint'}, t(`dashboard.chart.${o.key}.hint`)),
    svg, legend);
  return {el, draw: () => barChart(svg, bars)};
}
