// Campaigns (#/campaigns): the finished broadcasts grouped by category,
// cron job or analytics label, per day or week in the viewer's zone, from
// GET /push/campaigns; a bar chart of one metric per period (sent, reach,
// opens or CTR), values on the bars; and a breakdown by app, locale, A/B
// variant or platform from GET /push/campaigns/breakdown (sends, success
// rate, and what is not stored for the dimension, with a note saying
// why). Each table downloads as the server's CSV.

import {get, qs} from './api.js';
import {h, s, table, emptyRow, field, fill, add, isQuiet, showPageError, clearPageError} from './dom.js';
import {num, percent} from './format.js';
import {t, locale} from './i18n.js';
import * as apps from './apps.js';
import {barChart} from './campaignchart.js';
import {enumName} from './enums.js';

const GROUPS = ['category', 'job', 'label'];
const INTERVALS = ['day', 'week'];
const METRICS = ['sent', 'reach', 'opened', 'ctr'];
const DIMENSIONS = ['app', 'locale', 'variant', 'platform'];
const PRESETS = [7, 30, 90];
// The breakdown's "every group" choice: no category, job or label has a *.
const ALL = '*';

// The viewer's zone: the server counts days and weeks in it.
const zone = () => Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';

// YYYY-MM-DD of d in the viewer's zone.
function isoDate(d) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
}

function daysBack(n) {
  const d = new Date();
  d.setDate(d.getDate() - (n - 1));
  return isoDate(d);
}

// A period's start (RFC 3339 at local midnight) as a short date.
function periodLabel(iso) {
  const [y, m, d] = iso.slice(0, 10).split('-').map(Number);
  return new Intl.DateTimeFormat(locale(), {month: 'short', day: 'numeric'}).format(new Date(y, m - 1, d));
}

// The periods' first days (YYYY-MM-DD) from first to last: every day, or
// every Monday from the one on or before first.
function periods(first, last, interval) {
  const [y, m, d] = first.split('-').map(Number);
  const cur = new Date(y, m - 1, d);
  if (interval === 'week') cur.setDate(cur.getDate() - ((cur.getDay() + 6) % 7));
  const out = [];
  while (isoDate(cur) <= last && out.length <= 400) {
    out.push(isoDate(cur));
    cur.setDate(cur.getDate() + (interval === 'week' ? 7 : 1));
  }
  return out;
}

const groupName = (g) => (g === '' ? t('campaigns.none') : g);

// A header cell with its definition on hover.
const th = (label, tip) => (tip ? h('span', {title: tip, class: 'has-tip'}, label) : label);

// A number cell; data-value holds the exact value the CSV has.
const numCell = (n, cls) => h('td', {class: ['num', cls], 'data-value': n == null ? '' : String(n)}, n == null ? h('span', {title: t('campaigns.notStoredTip'), class: 'muted'}, '—') : num(n));
const pctCell = (r, cls) => h('td', {class: ['num', cls], 'data-value': r == null ? '' : String(r)}, r == null ? h('span', {title: t('campaigns.notStoredTip'), class: 'muted'}, '—') : percent(r));

export async function render(ctx) {
  const {root, signal} = ctx;
  add(root, h('h1', {tabindex: '-1'}, t('campaigns.title')), h('p', {class: 'hint'}, t('campaigns.intro')));

  const from = h('input', {id: 'campaigns-from', type: 'date', value: daysBack(30)});
  const to = h('input', {id: 'campaigns-to', type: 'date', value: isoDate(new Date())});
  const presets = PRESETS.map((n) => h('button', {type: 'button', class: 'btn btn-small', id: `campaigns-last-${n}`, on: {click: () => {
    from.value = daysBack(n);
    to.value = isoDate(new Date());
    load();
  }}}, t('campaigns.lastDays', {count: n})));
  const group = h('select', {id: 'campaigns-group', value: 'category'}, GROUPS.map((g) => h('option', {value: g}, t(`campaigns.group.${g}`))));
  const interval = h('select', {id: 'campaigns-interval', value: 'day'}, INTERVALS.map((i) => h('option', {value: i}, t(`campaigns.interval.${i}`))));
  const metric = h('select', {id: 'campaigns-metric', value: 'sent'}, METRICS.map((m) => h('option', {value: m}, t(`campaigns.metric.${m}`))));
  const formError = h('div', {id: 'campaigns-error', class: 'alert', role: 'alert', hidden: true});
  add(root, h('section', {class: 'card', id: 'campaigns-controls'},
    h('div', {class: 'row row-end'},
      field(t('campaigns.from'), from), field(t('campaigns.to'), to),
      field(t('campaigns.groupBy'), group), field(t('campaigns.intervalLabel'), interval)),
    h('div', {class: 'actions', role: 'group', 'aria-label': t('campaigns.presets')}, presets),
    formError));

  const svg = s('svg', {id: 'campaigns-chart', class: 'chart', role: 'img', 'aria-label': t('campaigns.chartLabel')});
  const trendCard = h('section', {class: 'card', id: 'campaigns-trends', 'aria-live': 'polite'});
  const chartCard = h('section', {class: 'card', id: 'campaigns-chart-card'},
    h('div', {class: 'row row-end'}, field(t('campaigns.metricLabel'), metric)), svg);

  const by = h('select', {id: 'campaigns-by', value: 'app'}, DIMENSIONS.map((d) => h('option', {value: d}, t(`campaigns.by.${d}`))));
  const key = h('select', {id: 'campaigns-key'});
  const breakdownCard = h('section', {class: 'card', id: 'campaigns-breakdown', 'aria-live': 'polite'});
  add(root, chartCard, trendCard,
    h('section', {class: 'card'}, h('h2', null, t('campaigns.breakdownTitle')),
      h('div', {class: 'row row-end'}, field(t('campaigns.byLabel'), by), field(t('campaigns.keyLabel'), key))),
    breakdownCard);

  let rows = [];
  let shownAns = null; // the trends answer on screen

  // The parameters both routes share.
  const params = () => ({group: group.value, from: from.value, to: to.value, tz: zone(), app: apps.current()});

  async function load() {
    formError.hidden = true;
    clearPageError();
    try {
      const ans = await get('/push/campaigns' + qs({...params(), interval: interval.value}), {signal});
      rows = ans.rows || [];
      shownAns = ans;
      showTrends(ans);
      fillKeys();
      await loadBreakdown();
    } catch (err) {
      shown(err);
    }
  }

  function shown(err) {
    if (isQuiet(err)) return;
    if (err.field) {
      fill(formError, err.field === 'from' || err.field === 'to' ? t('campaigns.badRange') : t('campaigns.badRequest'),
        h('details', null, h('summary', null, t('campaigns.details')), err.message));
      formError.hidden = false;
    } else {
      showPageError(root, err);
    }
  }

  function showTrends(ans) {
    const csv = '/push/campaigns' + qs({...params(), interval: interval.value, format: 'csv'});
    const body = rows.length ? rows.map((r) => h('tr', {'data-group': r.group, 'data-period': r.period_start.slice(0, 10)},
      h('td', {class: 'group'}, groupName(r.group)),
      h('td', {class: 'period'}, h('time', {datetime: r.period_start.slice(0, 10)}, periodLabel(r.period_start))),
      numCell(r.broadcasts, 'broadcasts'), numCell(r.targeted, 'targeted'), numCell(r.succeeded, 'succeeded'),
      numCell(r.failed, 'failed'), pctCell(r.reach, 'reach'), numCell(r.opened, 'opened'), numCell(r.clicked, 'clicked'),
      pctCell(r.ctr, 'ctr'))) : [emptyRow(10, t('campaigns.empty'))];
    fill(trendCard,
      h('div', {class: 'page-head'}, h('h2', null, t('campaigns.trendsTitle', {group: t(`campaigns.group.${ans.group}`)})),
        h('div', {class: 'actions'}, h('a', {id: 'campaigns-csv', class: 'btn', href: csv, download: `campaigns-${ans.group}-${ans.from}-${ans.to}.csv`}, t('campaigns.downloadCsv')))),
      h('p', {class: 'hint'}, t('campaigns.trendsHint', {tz: ans.tz})),
      table({id: 'campaigns-table'}, [t('campaigns.col.group'), t('campaigns.col.period'), t('campaigns.col.broadcasts'),
        t('campaigns.col.targeted'), t('campaigns.col.succeeded'), t('campaigns.col.failed'),
        th(t('campaigns.col.reach'), t('campaigns.reachTip')), t('campaigns.col.opened'), t('campaigns.col.clicked'),
        th(t('campaigns.col.ctr'), t('campaigns.ctrTip'))], body));
    drawChart();
  }

  // The chart: the chosen metric per period of the range (none: 0), over
  // every group shown.
  function drawChart() {
    const per = new Map();
    if (rows.length) {
      for (const day of periods(shownAns.from, shownAns.to, shownAns.interval)) {
        per.set(day, {targeted: 0, succeeded: 0, failed: 0, opened: 0, clicked: 0});
      }
    }
    for (const r of rows) {
      const p = per.get(r.period_start.slice(0, 10));
      if (!p) continue;
      for (const k of Object.keys(p)) p[k] += r[k];
    }
    const m = metric.value;
    const value = (p) => ({sent: p.succeeded + p.failed, opened: p.opened,
      reach: p.targeted ? p.succeeded / p.targeted : 0, ctr: p.succeeded ? p.clicked / p.succeeded : 0})[m];
    const ratio = m === 'reach' || m === 'ctr';
    const fmt = ratio ? percent : num;
    const points = [...per.keys()].sort().map((k) => {
      const v = value(per.get(k));
      return {label: periodLabel(k), value: v, title: `${periodLabel(k)}: ${fmt(v)}`};
    });
    barChart(svg, points, {fmt, ratio, axisLabel: t(`campaigns.metric.${m}`), empty: t('campaigns.empty')});
    svg.setAttribute('aria-label', t('campaigns.chartLabelOf', {metric: t(`campaigns.metric.${m}`)}));
  }

  // The breakdown's key choices: every group, or one group's value.
  function fillKeys() {
    const was = key.value;
    const keys = [...new Set(rows.map((r) => r.group))].sort();
    fill(key, h('option', {value: ALL}, t('campaigns.allGroups')), keys.map((k) => h('option', {value: k}, groupName(k))));
    key.value = keys.includes(was) ? was : ALL;
  }

  async function loadBreakdown() {
    const p = {...params(), by: by.value};
    if (key.value !== ALL) p.key = key.value;
    // qs drops empty values: the "none" group's key is sent as key=.
    let q = qs(p);
    if (p.key === '') q += '&key=';
    try {
      const ans = await get('/push/campaigns/breakdown' + q, {signal});
      showBreakdown(ans, '/push/campaigns/breakdown' + q + '&format=csv');
    } catch (err) {
      shown(err);
    }
  }

  // A breakdown key's name: a platform's in words; "" is no platform
  // counted (broadcasts sent before pushfan counted them), or none.
  function keyName(by, k) {
    if (by === 'platform') return k === '' ? t('campaigns.platform.notCounted') : enumName('platform', k);
    return k === '' ? t('campaigns.none') : k;
  }

  // The note under a breakdown's title: what its rows cannot show, and why.
  function breakdownNote(ans) {
    if (ans.by === 'platform') {
      // A platform row leaves its opens null when one of its broadcasts
      // was opened through tokens that carried no platform.
      const noEvents = ans.rows.some((r) => r.key !== '' && r.opened == null);
      return [t('campaigns.notePlatform'), noEvents ? t('campaigns.notePlatformEvents') : null,
        ans.rows.some((r) => r.key === '') ? t('campaigns.notePlatformNotCounted') : null].filter(Boolean).join(' ');
    }
    if (!ans.not_stored.length) return null;
    return [t('campaigns.noteVariants'), ans.rows.some((r) => r.succeeded == null) ? t('campaigns.noteOldSplit') : null].filter(Boolean).join(' ');
  }

  function showBreakdown(ans, csv) {
    const body = ans.rows.length ? ans.rows.map((r) => h('tr', {'data-key': r.key},
      h('td', {class: 'key'}, keyName(ans.by, r.key)), numCell(r.broadcasts, 'broadcasts'), numCell(r.sent, 'sent'),
      numCell(r.targeted, 'targeted'), numCell(r.succeeded, 'succeeded'), numCell(r.failed, 'failed'), pctCell(r.reach, 'reach'),
      pctCell(r.success_rate, 'success-rate'), numCell(r.opened, 'opened'), numCell(r.clicked, 'clicked'), pctCell(r.ctr, 'ctr'),
      pctCell(r.clicks_per_sent, 'clicks-per-sent')))
      : [emptyRow(12, t('campaigns.empty'))];
    const note = breakdownNote(ans);
    fill(breakdownCard,
      h('div', {class: 'page-head'}, h('h2', null, t('campaigns.breakdownOf', {by: t(`campaigns.by.${ans.by}`)})),
        h('div', {class: 'actions'}, h('a', {id: 'campaigns-breakdown-csv', class: 'btn', href: csv, download: `campaigns-${ans.by}.csv`}, t('campaigns.downloadCsv')))),
      note ? h('p', {class: 'hint', id: 'campaigns-note', title: ans.note || ''}, note) : null,
      table({id: 'campaigns-breakdown-table'}, [t('campaigns.col.key'), t('campaigns.col.broadcasts'), th(t('campaigns.col.sent'), t('campaigns.sentTip')),
        t('campaigns.col.targeted'), t('campaigns.col.succeeded'), t('campaigns.col.failed'), th(t('campaigns.col.reach'), t('campaigns.reachTip')),
        th(t('campaigns.col.successRate'), t('campaigns.successRateTip')),
        t('campaigns.col.opened'), t('campaigns.col.clicked'), th(t('campaigns.col.ctr'), t('campaigns.ctrTip')),
        th(t('campaigns.col.clicksPerSent'), t('campaigns.clicksPerSentTip'))], body));
  }

  for (const el of [from, to, group, interval]) el.addEventListener('change', load);
  metric.addEventListener('change', drawChart);
  by.addEventListener('change', loadBreakdown);
  key.addEventListener('change', loadBreakdown);
  await load();
}
