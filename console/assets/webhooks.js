// Webhooks (#/webhooks, #/webhooks/NAME): each configured endpoint with
// its health (last success, failures of the oldest waiting event, events
// waiting, disabled), and one endpoint's deliveries, newest first, paged
// by the API's keyset cursor. Senders may redeliver one delivery and
// enable a disabled endpoint; a viewer sees the same without the buttons.
//
// The endpoints come from the server's YAML config, so the page only
// reads them. Both tables refresh every REFRESH_MS while on screen: a
// retry or a redelivery changes them without anyone asking.

import {get, post, qs, may} from './api.js';
import {h, table, emptyRow, showPageError, clearPageError, isQuiet, fill, add} from './dom.js';
import {num, timeEl} from './format.js';
import {t, tOr} from './i18n.js';
import {enumEl} from './enums.js';

const REFRESH_MS = 3000;
const PAGE = 50;

export async function render(ctx) {
  const {root, signal} = ctx;
  const sender = may('admin'); // redeliver and enable are an admin's
  const selected = ctx.params[0] || '';
  add(root, h('h1', {tabindex: '-1'}, selected ? t('webhooks.heading', {name: selected}) : t('nav.webhooks')));

  const endpoints = h('div');
  const deliveries = h('div');
  const pager = {cursor: '', next: null};
  const older = h('button', {type: 'button', id: 'deliveries-older', class: 'btn', disabled: true,
    on: {click: () => { pager.cursor = pager.next; refresh(); }}}, t('common.older'));
  const newest = h('button', {type: 'button', id: 'deliveries-newest', class: 'btn', disabled: true,
    on: {click: () => { pager.cursor = ''; refresh(); }}}, t('common.newest'));
  const actionError = h('p', {id: 'webhook-action-error', class: 'alert', role: 'alert', hidden: true});

  add(root, actionError,
    h('section', {class: 'card', 'aria-labelledby': 'endpoints-h'},
      h('h2', {id: 'endpoints-h'}, t('webhooks.endpoints')),
      h('p', {class: 'hint'}, t('webhooks.hint')),
      endpoints));
  if (selected) {
    add(root, h('section', {class: 'card', 'aria-labelledby': 'deliveries-h'},
      h('h2', {id: 'deliveries-h'}, t('webhooks.deliveries')), deliveries, h('div', {class: 'pager'}, newest, older)));
  }

  // An action (redeliver, enable) then an immediate refresh; its failure
  // stays on screen until the next action.
  async function act(btn, path) {
    btn.disabled = true;
    actionError.hidden = true;
    try {
      await post(path, undefined, {signal});
      await refreshNow();
    } catch (err) {
      if (isQuiet(err)) return;
      actionError.textContent = err.message;
      actionError.hidden = false;
      btn.disabled = false;
    }
  }

  function drawEndpoints(list) {
    const rows = list.map((w) => h('tr', {'data-endpoint': w.name, class: w.name === selected ? 'self' : null},
      h('th', {scope: 'row'}, h('a', {href: '#/webhooks/' + encodeURIComponent(w.name)}, w.name)),
      h('td', null, h('code', null, w.url)),
      h('td', null, health(w)),
      h('td', null, timeEl(w.last_success)),
      h('td', {class: 'num', 'data-value': String(w.consecutive_failures)}, num(w.consecutive_failures)),
      h('td', {class: 'num queued', 'data-value': String(w.queued)}, num(w.queued)),
      sender ? h('td', null, w.disabled_at ? h('button', {type: 'button', class: 'btn btn-small enable',
        on: {click: (ev) => act(ev.currentTarget, `/push/webhooks/${encodeURIComponent(w.name)}/enable`)}}, t('webhooks.enable')) : null) : null));
    if (!rows.length) {
      fill(endpoints, emptyState());
      return;
    }
    const heads = [t('webhooks.col.name'), t('webhooks.col.url'), t('webhooks.col.health'), t('webhooks.col.lastSuccess'), t('webhooks.col.failures'), t('webhooks.col.waiting')];
    fill(endpoints, table({id: 'webhooks-table'}, sender ? [...heads, ''] : heads, rows));
  }

  function drawDeliveries(page) {
    pager.next = page.next_cursor || null;
    older.disabled = !pager.next;
    newest.disabled = !pager.cursor;
    fill(deliveries, deliveriesTable('deliveries-table', page.deliveries || [], sender
      ? (d) => (ev) => act(ev.currentTarget, `/push/webhooks/${encodeURIComponent(selected)}/deliveries/${d.id}/redeliver`)
      : null));
  }

  let timer = 0;
  let seq = 0; // a slower, older answer must not overwrite a newer one
  ctx.cleanup(() => clearTimeout(timer));
  async function refreshNow() {
    const mine = ++seq;
    const [list, page] = await Promise.all([
      get('/push/webhooks', {signal}),
      selected ? get(`/push/webhooks/${encodeURIComponent(selected)}/deliveries` + qs({limit: PAGE, cursor: pager.cursor}), {signal}) : null,
    ]);
    if (mine !== seq) return;
    drawEndpoints(list.webhooks || []);
    if (page) drawDeliveries(page);
    clearPageError();
  }
  // One request at a time: the next waits for the last answer.
  async function refresh() {
    clearTimeout(timer);
    try {
      await refreshNow();
    } catch (err) {
      if (signal.aborted || err.status === 401) return;
      showPageError(root, err);
    }
    timer = setTimeout(refresh, REFRESH_MS);
  }
  await refresh();
}

// No endpoint yet: what webhooks are for, and the next step (they are
// added in the config file, so the step is the lines to add there).
const EXAMPLE = `webhooks:
  - name: app
    url: https://app.example.com/hooks/pushfan
    secret: whsec_...   # a base64 key after whsec_
    events: [broadcast.finished, tokens.invalidated]`;

function emptyState() {
  const copied = h('span', {class: 'hint', 'aria-live': 'polite'});
  const example = h('pre', {id: 'webhooks-example', class: 'example'}, h('code', null, EXAMPLE));
  return h('div', {id: 'webhooks-empty', class: 'empty-state'},
    h('p', null, h('strong', null, t('webhooks.empty.title'))),
    h('p', null, t('webhooks.empty.what')),
    h('p', null, t('webhooks.empty.how')),
    example,
    h('p', {class: 'actions'},
      h('button', {type: 'button', id: 'webhooks-add-first', class: 'btn btn-primary', on: {click: async () => {
        try {
          await navigator.clipboard.writeText(EXAMPLE);
          copied.textContent = t('webhooks.empty.copied');
        } catch {
          copied.textContent = t('webhooks.empty.copyByHand');
        }
      }}}, t('webhooks.empty.add')), ' ', copied),
    h('p', {class: 'hint'}, t('webhooks.empty.restart')));
}

function health(w) {
  if (w.disabled_at) {
    return h('span', {class: 'health', 'data-health': 'disabled'}, h('span', {class: 'badge badge-failed'}, t('webhooks.health.disabled')), ' ',
      h('span', {class: 'muted'}, t('webhooks.since'), ' ', timeEl(w.disabled_at), w.disabled_reason ? [': ', h('span', {'data-raw': ''}, w.disabled_reason)] : ''));
  }
  if (w.consecutive_failures > 0) return h('span', {class: 'health', 'data-health': 'failing'}, h('span', {class: 'badge badge-held'}, t('webhooks.health.failing')));
  return h('span', {class: 'health', 'data-health': 'healthy'}, h('span', {class: 'badge badge-completed'}, t('webhooks.health.healthy')));
}

// deliveriesTable is one endpoint's deliveries (this page), or one
// broadcast's to every endpoint (the watch page: rows carry endpoint).
// redeliver(d) returns the button's click handler, or is null for a viewer.
export function deliveriesTable(id, list, redeliver, withEndpoint) {
  const heads = [...(withEndpoint ? [t('webhooks.col.endpoint')] : []), t('webhooks.col.event'), 'webhook-id', t('webhooks.col.broadcast'),
    t('webhooks.col.status'), t('webhooks.col.attempts'), t('webhooks.col.lastAnswer'), t('webhooks.col.next')];
  const rows = list.map((d) => h('tr', {'data-delivery': d.id, 'data-type': d.type, 'data-status': d.status},
    withEndpoint ? h('td', null, h('a', {href: '#/webhooks/' + encodeURIComponent(d.endpoint)}, d.endpoint)) : null,
    h('td', null, enumEl('event', d.type)),
    h('td', null, h('code', {class: 'webhook-id'}, d.webhook_id)),
    h('td', null, d.broadcast_id ? h('a', {href: `#/broadcasts/${d.broadcast_id}`}, `#${d.broadcast_id}`) : '—'),
    h('td', null, h('span', {class: ['badge', 'badge-' + STATUS_BADGE[d.status]]}, tOr(`webhooks.status.${d.status}`, d.status))),
    h('td', {class: 'num attempts'}, num(d.attempts)),
    h('td', {class: 'last-answer'}, lastAnswer(d)),
    h('td', null, timeEl(d.status === 'pending' ? d.next_attempt_at : d.delivered_at)),
    redeliver ? h('td', null, h('button', {type: 'button', class: 'btn btn-small redeliver', on: {click: redeliver(d)}}, t('webhooks.redeliver'))) : null));
  const cols = heads.length + (redeliver ? 1 : 0);
  return table({id}, redeliver ? [...heads, ''] : heads, rows.length ? rows : emptyRow(cols, t('webhooks.noDeliveries')));
}

// The badge colour of a delivery's status.
const STATUS_BADGE = {pending: 'queued', delivered: 'completed', gone: 'canceled', expired: 'failed'};

function lastAnswer(d) {
  if (d.last_status == null && !d.last_error) return h('span', {class: 'muted'}, '—');
  return [d.last_status != null ? h('code', null, String(d.last_status)) : null, d.last_error ? [' ', h('span', {'data-raw': ''}, d.last_error)] : ''];
}

// broadcastDeliveries is the watch page's card: this broadcast's events
// (started, held, finished, tokens.invalidated) to every endpoint, newest
// first, refreshed every REFRESH_MS while the page is open. It stays
// hidden when no endpoint is configured.
export function broadcastDeliveries(ctx, id) {
  const {signal} = ctx;
  const sender = may('admin'); // redeliver and enable are an admin's
  const body = h('div');
  const err = h('p', {class: 'error-text', role: 'alert', hidden: true});
  const card = h('section', {class: 'card', id: 'broadcast-webhooks', 'aria-labelledby': 'webhooks-h', hidden: true},
    h('h2', {id: 'webhooks-h'}, t('webhooks.broadcastDeliveries')), body, err);
  let timer = 0;
  ctx.cleanup(() => clearTimeout(timer));
  const load = async () => {
    clearTimeout(timer);
    try {
      const {webhooks = []} = await get('/push/webhooks', {signal});
      // At most PAGE per endpoint: a broadcast has a handful of events,
      // plus one per 1,000 invalidated tokens.
      const pages = await Promise.all(webhooks.map((w) =>
        get(`/push/webhooks/${encodeURIComponent(w.name)}/deliveries` + qs({broadcast_id: id, limit: PAGE}), {signal})
          .then((p) => (p.deliveries || []).map((d) => ({...d, endpoint: w.name})))));
      if (signal.aborted) return;
      const list = pages.flat().sort((a, b) => b.id - a.id);
      card.hidden = webhooks.length === 0;
      err.hidden = true;
      fill(body, deliveriesTable('broadcast-deliveries', list, sender ? (d) => async (ev) => {
        const btn = ev.currentTarget;
        btn.disabled = true;
        try {
          await post(`/push/webhooks/${encodeURIComponent(d.endpoint)}/deliveries/${d.id}/redeliver`, undefined, {signal});
          await load();
        } catch (e) {
          if (isQuiet(e)) return;
          err.textContent = t('webhooks.redeliverFailed', {message: e.message});
          err.hidden = false;
          btn.disabled = false;
        }
      } : null, true));
    } catch (e) {
      if (signal.aborted || e.status === 401) return;
      err.textContent = t('webhooks.readFailed', {message: e.message});
      err.hidden = false;
    }
    timer = setTimeout(load, REFRESH_MS);
  };
  load();
  return card;
}
