// The cluster: the shared send budget, each instance's share of it and
// the chunks being sent now. Refreshed every 2 s while on screen. Each
// app's project has its own budget: the page shows the chosen app's.

import {get, qs} from './api.js';
import * as apps from './apps.js';
import {h, table, emptyRow, showPageError, clearPageError, isQuiet, fill, add} from './dom.js';
import {num, perSecond, timeEl, percent} from './format.js';
import {t} from './i18n.js';
import {enumEl} from './enums.js';

const REFRESH_MS = 2000;

export async function render(ctx) {
  const {root, signal} = ctx;
  add(root, h('h1', {tabindex: '-1'}, t('nav.cluster')));
  const summary = h('div', {class: 'stats'});
  const members = h('div');
  const chunks = h('div');
  const stamp = h('p', {class: 'muted', 'aria-live': 'off'});
  add(root, 
    h('section', {class: 'card', 'aria-labelledby': 'budget-h'}, h('h2', {id: 'budget-h'}, apps.several() ? t('cluster.budgetOf', {app: apps.current()}) : t('cluster.budget')), summary, stamp),
    h('section', {class: 'card', 'aria-labelledby': 'members-h'}, h('h2', {id: 'members-h'}, t('cluster.members')), members),
    h('section', {class: 'card', 'aria-labelledby': 'chunks-h'}, h('h2', {id: 'chunks-h'}, t('cluster.runningChunks')), chunks));

  function draw(c) {
    const limit = c.limit_per_second;
    fill(summary, 
      stat(t('cluster.limit'), limit != null ? perSecond(limit) : t('cluster.noLimit')),
      stat(t('cluster.paused'), c.paused_until ? h('span', null, t('cluster.until'), ' ', timeEl(c.paused_until)) : t('common.no')),
      stat(t('cluster.members'), num((c.members || []).length)),
      stat(t('cluster.chunksRunning'), num((c.chunks || []).length)));
    fill(stamp, t('cluster.updated'), ' ', timeEl(new Date().toISOString(), {clock: true}), t('cluster.refreshes'));

    fill(members, table({id: 'members'}, [t('cluster.col.instance'), t('cluster.col.sending'), t('cluster.col.demand'), t('cluster.col.share'), t('cluster.col.heartbeat')],
      (c.members || []).length ? c.members.map((m) => memberRow(m, limit)) : emptyRow(5, t('cluster.noMembers'))));
    fill(chunks, table({id: 'chunks'}, [t('cluster.col.broadcast'), t('cluster.col.seq'), t('cluster.col.class'), t('cluster.col.owner'), t('cluster.col.lease'), t('cluster.col.cursor')],
      (c.chunks || []).length ? c.chunks.map(chunkRow) : emptyRow(6, t('cluster.noChunks'))));
  }

  // One request at a time: the next waits for the last answer, so a slow
  // server is not piled on.
  let timer = 0;
  ctx.cleanup(() => clearTimeout(timer));
  async function refresh() {
    try {
      draw(await get('/push/cluster' + qs({app: apps.current()}), {signal}));
      clearPageError();
    } catch (err) {
      if (signal.aborted || err.status === 401) return;
      if (!isQuiet(err)) showPageError(root, err);
    }
    timer = setTimeout(refresh, REFRESH_MS);
  }
  await refresh();
}

function stat(label, value) {
  return h('div', {class: 'stat'}, h('span', {class: 'stat-label'}, label), h('strong', {class: 'stat-value'}, value));
}

function memberRow(m, limit) {
  const share = m.share_per_second;
  const ratio = limit ? Math.min(1, (share || 0) / limit) : 0;
  const bar = h('span', {class: 'meter-fill'});
  bar.style.width = (ratio * 100).toFixed(1) + '%';
  return h('tr', {'data-instance': m.instance, class: m.self ? 'self' : null},
    h('th', {scope: 'row'}, h('code', null, m.instance), m.self ? h('span', {class: 'tag tag-self'}, t('cluster.thisInstance')) : null),
    h('td', null, m.sending ? t('common.yes') : t('common.no')),
    h('td', {class: 'num'}, m.demand_per_second == null ? '—' : perSecond(m.demand_per_second)),
    h('td', null, h('div', {class: 'share'},
      h('span', {class: 'num'}, share == null ? '—' : perSecond(share)),
      h('span', {class: 'meter', title: limit ? t('cluster.ofLimit', {percent: percent(ratio)}) : null}, bar))),
    h('td', {class: 'num'}, m.heartbeat_age_ms == null ? '—' : t('format.ms', {n: m.heartbeat_age_ms})));
}

function chunkRow(c) {
  return h('tr', {'data-broadcast': c.broadcast_id, 'data-seq': c.seq},
    h('td', null, h('a', {href: `#/broadcasts/${c.broadcast_id}`}, `#${c.broadcast_id}`)),
    h('td', {class: 'num'}, c.seq),
    h('td', null, enumEl('class', c.class)),
    h('td', null, h('code', null, c.owner)),
    h('td', null, timeEl(c.lease_until)),
    h('td', {class: 'num'}, `${num(c.cursor_id)} / ${num(c.hi_id)}`));
}
