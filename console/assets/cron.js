// Cron jobs as configured: each one's message, audience and schedule in
// words (the spec behind a details toggle), its next fire in the viewer's
// zone and the job's, its last fire (a link to the broadcast it made, or
// "skipped"), and whether it is paused; the chosen app's, when there are
// several. An admin pauses, resumes and runs a job now (POST
// /push/cron/{job}/pause|resume|run): a pause holds on every instance.

import {get, post, may} from './api.js';
import {h, badge, table, emptyRow, add, fill, confirmDialog, isQuiet} from './dom.js';
import {timeEl} from './format.js';
import {t, locale} from './i18n.js';
import {describeSchedule} from './crondesc.js';
import * as apps from './apps.js';

export async function render(ctx) {
  const {root, signal} = ctx;
  add(root, h('h1', {tabindex: '-1'}, t('cron.title')));
  const admin = may('admin');
  const notice = h('p', {id: 'cron-notice', class: 'alert alert-info', role: 'status', hidden: true});
  const error = h('p', {id: 'cron-error', class: 'alert', role: 'alert', hidden: true});
  const body = h('tbody');
  add(root, notice, error, h('div', {class: 'card'},
    h('div', {class: 'table-wrap'}, h('table', {id: 'cron-jobs'},
      h('thead', null, h('tr', null, [t('cron.col.job'), t('cron.col.audience'), t('cron.col.schedule'), t('cron.col.next'),
        t('cron.col.last'), t('cron.col.state'), admin ? t('cron.col.actions') : null].filter(Boolean).map((c) => h('th', {scope: 'col'}, c)))),
      body))));

  async function load() {
    const {jobs: all = []} = await get('/push/cron', {signal});
    const jobs = all.filter(apps.mine);
    const cols = admin ? 7 : 6;
    fill(body, ...(jobs.length ? jobs.map(row)
      : [emptyRow(cols, apps.several() ? t('cron.empty.app', {app: apps.current()}) : t('cron.empty'))]));
  }

  function row(j) {
    return h('tr', {'data-job': j.name, 'data-paused': String(!!j.paused)},
      h('th', {scope: 'row'}, h('div', {class: 'stack'}, h('strong', null, j.name), messageText(j.message))),
      h('td', {class: 'job-audience'}, audienceText(j.audience)),
      h('td', null, scheduleCell(j)),
      h('td', {class: 'job-next'}, nextFire(j)),
      h('td', null, lastFire(j.last_fire)),
      h('td', {class: 'job-state'}, stateTag(j)),
      admin ? h('td', null, controls(j)) : null);
  }

  function controls(j) {
    const btn = (cls, label, fn) => h('button', {type: 'button', class: ['btn', cls], 'data-action': cls, on: {click: fn}}, label);
    return h('div', {class: 'actions'},
      j.paused
        ? btn('job-resume', t('cron.resume'), (ev) => act(ev.currentTarget, () => post(`/push/cron/${j.name}/resume`, {}, {signal}), t('cron.resumed', {job: j.name})))
        : btn('job-pause', t('cron.pause'), (ev) => act(ev.currentTarget, () => post(`/push/cron/${j.name}/pause`, {}, {signal}), t('cron.paused.notice', {job: j.name}))),
      btn('job-run', t('cron.runNow'), async (ev) => {
        const button = ev.currentTarget;
        const ok = await confirmDialog({title: t('cron.run.confirmTitle', {job: j.name}),
          body: t('cron.run.confirmBody', {audience: audienceText(j.audience)}), ok: t('cron.runNow')});
        if (!ok) return;
        // A second click, another admin's, or the minute's own fire made it
        // already (Idempotent-Replayed): nothing new was sent, and it says so.
        await act(button, () => post(`/push/cron/${j.name}/run`, {}, {signal, headers: true}), null, ({body: b, headers}) =>
          h('span', {'data-replayed': String(headers.get('Idempotent-Replayed') === 'true')},
            headers.get('Idempotent-Replayed') === 'true' ? t('cron.run.already', {job: j.name}) : t('cron.run.started', {job: j.name}), ' ',
            h('a', {id: 'cron-run-link', href: `#/broadcasts/${b.id}`}, `#${b.id}`)));
      }));
  }

  async function act(button, fn, text, rich) {
    error.hidden = true;
    notice.hidden = true;
    button.disabled = true;
    try {
      const out = await fn();
      await load(); // the table first: the notice says the change is shown
      fill(notice, rich ? rich(out) : text);
      notice.hidden = false;
    } catch (err) {
      if (isQuiet(err)) return;
      error.textContent = err.message;
      error.hidden = false;
    } finally {
      if (button.isConnected) button.disabled = false;
    }
  }

  await load();
}

function messageText(m) {
  if (!m) return null;
  const text = [m.title, m.body].filter(Boolean).join(' — ');
  return h('span', {class: 'muted job-message'}, text || (m.data ? t('cron.message.dataOnly') : t('cron.message.none')));
}

// The configured audience in words: "All users", "Segment: vip",
// "Audience low_ids (max_user = 5)", "3 users by id".
export function audienceText(a) {
  if (!a) return '—';
  if (a.all) return t('cron.audience.all');
  if (a.segment) return t('cron.audience.segment', {name: a.segment});
  if (Array.isArray(a.user_ids)) return t('cron.audience.users', {count: a.user_ids.length});
  if (a.name) {
    const params = Object.entries(a.params || {}).map(([k, v]) => `${k} = ${typeof v === 'string' ? v : JSON.stringify(v)}`);
    return params.length ? t('cron.audience.namedWith', {name: a.name, params: params.join(', ')}) : t('cron.audience.named', {name: a.name});
  }
  return JSON.stringify(a);
}

function scheduleCell(j) {
  const words = describeSchedule(j.schedule);
  return h('div', {class: 'stack'},
    h('span', {class: 'job-schedule'}, words || j.schedule),
    h('details', null, h('summary', null, t('cron.details')),
      h('p', null, t('cron.spec'), ' ', h('code', null, j.schedule)),
      h('p', null, t('cron.zone', {zone: j.timezone})),
      j.catchup ? h('p', null, t('cron.catchup', {catchup: j.catchup})) : null));
}

// The next fire in the viewer's zone, and in the job's when it differs.
function nextFire(j) {
  const next = j.next_fires?.[0];
  if (!next) return h('span', {class: 'muted'}, t('cron.next.none'));
  const d = new Date(next);
  const viewer = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const inJob = new Intl.DateTimeFormat(locale(), {dateStyle: 'medium', timeStyle: 'short', timeZone: j.timezone || 'UTC'}).format(d);
  return h('div', {class: 'stack'},
    h('span', null, timeEl(next), ' ', h('span', {class: 'muted'}, t('cron.next.yours'))),
    viewer !== j.timezone ? h('span', {class: 'job-next-zone'}, t('cron.next.inZone', {time: inJob, zone: j.timezone || 'UTC'})) : null,
    j.paused ? h('span', {class: 'muted'}, t('cron.next.whilePaused')) : null);
}

function stateTag(j) {
  if (j.paused) {
    return h('div', {class: 'stack'}, h('span', {class: 'tag tag-paused'}, t('cron.state.paused')),
      j.paused_at ? h('span', {class: 'muted'}, timeEl(j.paused_at), j.paused_by ? ' ' + t('cron.state.by', {name: j.paused_by}) : '') : null);
  }
  return j.enabled ? h('span', {class: 'tag tag-on'}, t('cron.state.enabled')) : h('span', {class: 'tag'}, t('cron.state.disabled'));
}

function lastFire(f) {
  if (!f) return h('span', {class: 'muted'}, t('cron.last.never'));
  return h('div', {class: 'stack'},
    timeEl(f.fire_time),
    f.skipped ? h('span', {class: 'tag'}, t('cron.last.skipped')) : null,
    f.broadcast_id ? h('span', null, h('a', {href: `#/broadcasts/${f.broadcast_id}`}, `#${f.broadcast_id}`), ' ',
      f.status ? badge(f.status) : null) : null);
}
