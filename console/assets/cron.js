// Cron jobs as configured, with their next fires and the last one (a link
// to the broadcast it made, or "skipped"): the chosen app's, when there
// are several.

import {get} from './api.js';
import {h, badge, table, emptyRow, add} from './dom.js';
import {timeEl} from './format.js';
import * as apps from './apps.js';

export async function render(ctx) {
  const {root, signal} = ctx;
  add(root, h('h1', {tabindex: '-1'}, 'Cron'));
  const {jobs: all = []} = await get('/push/cron', {signal});
  const jobs = all.filter(apps.mine);

  const rows = jobs.map((j) => h('tr', {'data-job': j.name},
    h('th', {scope: 'row'}, j.name),
    h('td', null, h('code', null, j.schedule)),
    h('td', null, j.timezone),
    h('td', null, j.enabled ? h('span', {class: 'tag tag-on'}, 'enabled') : h('span', {class: 'tag'}, 'disabled')),
    h('td', null, j.catchup || '—'),
    h('td', null, j.next_fires?.length
      ? h('ul', {class: 'plain'}, j.next_fires.map((t) => h('li', null, timeEl(t))))
      : h('span', {class: 'muted'}, 'none')),
    h('td', null, lastFire(j.last_fire))));

  add(root, h('div', {class: 'card'},
    table({id: 'cron-jobs'}, ['Job', 'Schedule', 'Zone', 'Enabled', 'Catch-up', 'Next fires', 'Last fire'],
      rows.length ? rows : emptyRow(7, apps.several() ? `No cron jobs are configured for the app ${apps.current()}.` : 'No cron jobs are configured.'))));
}

function lastFire(f) {
  if (!f) return h('span', {class: 'muted'}, 'never');
  return h('div', {class: 'stack'},
    timeEl(f.fire_time),
    f.skipped ? h('span', {class: 'tag'}, 'skipped') : null,
    f.broadcast_id ? h('span', null, h('a', {href: `#/broadcasts/${f.broadcast_id}`}, `#${f.broadcast_id}`), ' ',
      f.status ? badge(f.status) : null) : null);
}
