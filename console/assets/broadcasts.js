// Broadcasts list: filters by status and trigger (and the app the header
// has chosen, when there are several), keyset paging. The API
// pages from the newest down: "Older" passes next_cursor, "Newest" starts
// over (a cursor only leads one way, so there is no "Newer").

import {get, qs} from './api.js';
import {h, badge, table, emptyRow, showPageError, clearPageError, fill, add, statusName} from './dom.js';
import {num, timeEl} from './format.js';
import * as apps from './apps.js';
import {t} from './i18n.js';

export const STATUSES = ['held', 'scheduled', 'planning', 'queued', 'running', 'completed', 'canceled', 'failed'];
export const TRIGGERS = ['api', 'schedule', 'cron', 'resend'];
const PAGE = 50;

export async function render(ctx) {
  const {root, signal} = ctx;
  const state = {status: '', trigger: '', cursor: '', next: null, seq: 0};

  const select = (id, label, values, words) => h('div', {class: 'field field-inline'},
    h('label', {for: id}, label),
    h('select', {id, on: {change: (e) => {
      state[id === 'filter-status' ? 'status' : 'trigger'] = e.target.value;
      state.cursor = '';
      load();
    }}}, h('option', {value: ''}, t('broadcasts.any')), values.map((v) => h('option', {value: v}, words(v)))));

  const tbody = h('tbody');
  const tbl = h('table', {id: 'broadcasts-table', 'aria-busy': 'true'},
    h('caption', {class: 'sr-only'}, t('broadcasts.caption')),
    h('thead', null, h('tr', null, [t('broadcasts.col.id'), t('broadcasts.col.status'), t('broadcasts.col.trigger'), t('broadcasts.col.title'),
      t('broadcasts.col.targeted'), t('broadcasts.col.succeeded'), t('broadcasts.col.failed'), t('broadcasts.col.created'), t('broadcasts.col.by')]
      .map((c) => h('th', {scope: 'col'}, c)))),
    tbody);
  const older = h('button', {type: 'button', id: 'list-older', class: 'btn', disabled: true,
    on: {click: () => { state.cursor = state.next; load(); }}}, t('common.older'));
  const newest = h('button', {type: 'button', id: 'list-newest', class: 'btn', disabled: true,
    on: {click: () => { state.cursor = ''; load(); }}}, t('common.newest'));
  const where = h('span', {class: 'muted', 'aria-live': 'polite'});

  add(root, 
    h('h1', {tabindex: '-1'}, t('nav.broadcasts')),
    h('div', {class: 'card'},
      h('div', {class: 'toolbar'},
        select('filter-status', t('broadcasts.col.status'), STATUSES, statusName),
        select('filter-trigger', t('broadcasts.col.trigger'), TRIGGERS, triggerName)),
      h('div', {class: 'table-wrap'}, tbl),
      h('div', {class: 'pager'}, newest, older, where)));

  async function load() {
    const seq = ++state.seq; // a slower, older answer must not overwrite a newer one
    tbl.setAttribute('aria-busy', 'true');
    older.disabled = newest.disabled = true;
    try {
      const page = await get('/push/broadcasts' + qs({app: apps.current(), status: state.status, trigger: state.trigger, limit: PAGE, cursor: state.cursor}), {signal});
      if (seq !== state.seq) return;
      clearPageError();
      state.next = page.next_cursor || null;
      const list = page.broadcasts || [];
      fill(tbody, ...(list.length ? list.map(row) : [emptyRow(9, t('broadcasts.none'))]));
      where.textContent = state.cursor ? t('broadcasts.olderPage') : t('broadcasts.newestFirst');
    } catch (err) {
      if (seq !== state.seq) return;
      showPageError(root, err);
    } finally {
      if (seq === state.seq) {
        older.disabled = !state.next;
        newest.disabled = !state.cursor;
        tbl.setAttribute('aria-busy', 'false');
      }
    }
  }

  await load();
}

// A broadcast's headline for lists: its title, else its body, else what
// it is.
export function headline(b) {
  const m = b.message || {};
  if (m.variants && m.variants.length) {
    // A/B: the first variant's text, and how many there are.
    return t('broadcasts.ab', {headline: headline({message: m.variants[0]}), variants: m.variants.map((v) => v.name).join(', ')});
  }
  return m.title || m.body || (m.data ? t('broadcasts.dataOnly') : t('broadcasts.noText'));
}

function row(b) {
  return h('tr', {'data-id': b.id},
    h('td', null, h('a', {href: `#/broadcasts/${b.id}`}, `#${b.id}`)),
    h('td', null, badge(b.status), b.dry_run ? h('span', {class: 'tag'}, t('broadcasts.dryRun')) : null),
    h('td', {'data-trigger': b.trigger}, triggerName(b.trigger)),
    h('td', {class: 'title-cell', 'data-raw': ''}, headline(b)),
    h('td', {class: 'num', 'data-users': b.users_targeted ?? '', 'data-devices': b.targeted ?? ''}, audienceSize(b)),
    h('td', {class: 'num'}, num(b.succeeded)),
    h('td', {class: 'num'}, num(b.failed)),
    h('td', null, timeEl(b.created_at)),
    h('td', null, b.created_by || '—'));
}

// audienceSize is a broadcast's audience in words, "1,502 users · 1,727
// devices": its users (users_targeted, each once) beside its devices
// (targeted). Its devices alone while its users are not counted (they
// land just after the plan, or never for a broadcast from before the
// count), "counting…" while its devices are not.
export function audienceSize(b) {
  if (b.targeted == null) return t('broadcasts.counting');
  const devices = t('broadcasts.devices', {count: b.targeted});
  return b.users_targeted == null ? devices : `${t('broadcasts.users', {count: b.users_targeted})} · ${devices}`;
}

// A trigger in words (api, schedule, cron, resend); another as it is.
export function triggerName(trigger) {
  return TRIGGERS.includes(trigger) ? t(`trigger.${trigger}`) : trigger;
}
