// The watch page's message and details cards: what was sent, to whom,
// under which rules, and when; the engineer's detail (chunks, claims,
// takeovers) behind a toggle.

import {h, table, defList} from './dom.js';
import {num, timeEl, duration, perSecond, isFinal} from './format.js';
import {windowText} from './compose.js';
import {describe} from './segfilter.js';
import {t} from './i18n.js';
import {enumEl} from './enums.js';
import {triggerName} from './broadcasts.js';
import * as apps from './apps.js';

function audienceText(a) {
  if (!a) return '—';
  if (a.all) return t('watch.audience.all');
  if (a.user_ids) {
    const shown = a.user_ids.slice(0, 20).join(', ');
    return t('watch.audience.userIds', {count: a.user_ids.length, ids: shown + (a.user_ids.length > 20 ? ', …' : '')});
  }
  if (a.name) {
    const p = Object.entries(a.params || {}).map(([k, v]) => `${k}=${Array.isArray(v) ? v.join(',') : v}`);
    return p.length ? `${a.name} (${p.join(', ')})` : a.name;
  }
  if (a.segment) {
    // The version it was sent to, as it was then (a later edit of the
    // segment does not change it).
    const sg = a.segment;
    return h('div', {id: 'broadcast-segment', 'data-segment': sg.name, 'data-version': sg.version},
      t('watch.audience.segment'), ' ', h('a', {href: `#/segments/${encodeURIComponent(sg.name)}`}, sg.name), ' ',
      t('watch.audience.segmentVersion', {version: sg.version}),
      sg.filter ? describe(h, sg.filter) : null);
  }
  if (a.resend_of) {
    return h('span', null, t('watch.audience.resendOf'), ' ', h('a', {href: `#/broadcasts/${a.resend_of}`}, `#${a.resend_of}`),
      a.codes?.length ? ' ' + t('watch.audience.resendCodes', {codes: a.codes.join(', ')}) : '');
  }
  return JSON.stringify(a);
}

export function messageView(b) {
  const m = b.message || {};
  const out = [h('h2', {id: 'msg-h'}, t('watch.message.heading')),
    defList([
      [t('watch.message.title'), m.title],
      [t('watch.message.body'), m.body ? h('span', {class: 'pre-wrap'}, m.body) : null],
      [t('watch.message.image'), m.image ? h('code', {class: 'break'}, m.image) : null],
    ])];
  if (m.data && Object.keys(m.data).length) {
    out.push(h('h3', null, t('watch.message.data')), defList(Object.entries(m.data).map(([k, v]) => [k, h('code', null, v)])));
  }
  if (m.localized && Object.keys(m.localized).length) {
    out.push(h('h3', null, t('watch.message.localized')),
      table(null, [t('watch.message.locale'), t('watch.message.title'), t('watch.message.body')],
        Object.entries(m.localized).map(([l, v]) => h('tr', null, h('td', null, l), h('td', null, v.title || ''), h('td', null, v.body || '')))));
  }
  for (const k of ['android', 'apns', 'webpush', 'fcm_options']) {
    if (m[k]) out.push(h('h3', {title: k}, t(`watch.message.override.${k}`)), h('pre', {class: 'json'}, JSON.stringify(m[k], null, 2)));
  }
  if (m.variants && m.variants.length) {
    out.push(h('h3', null, t('watch.message.variants')), table({id: 'ab-messages'},
      [t('watch.message.variant'), t('watch.message.weight'), t('watch.message.title'), t('watch.message.body')],
      m.variants.map((v) => h('tr', null, h('td', null, h('code', null, v.name)), h('td', {class: 'num'}, num(v.weight)),
        h('td', null, v.title || ''), h('td', null, v.body || '')))));
  } else if (!m.title && !m.body && !m.data) out.push(h('p', {class: 'muted'}, t('watch.message.noText')));
  return out;
}

// A count with its value in data-value (as the legend's).
function countEl(key, n) {
  return h('strong', {id: 'count-' + key, 'data-value': String(n || 0)}, num(n || 0));
}

// consentRules is the category's rules as the broadcast ran under them,
// in plain words: who had to have consented, the night window, the labels.
function consentRules(c) {
  const who = (rule, tableText) => {
    if (!rule) return null;
    if (rule === 'table') return tableText;
    return h('span', null, t('watch.consent.whoRule'), ' ', h('code', null, rule));
  };
  const night = c.night ? windowText(c.night.window) : '';
  const items = [
    c.consent ? h('span', null, t('watch.consent.only'), ' ', who(c.consent, t('watch.consent.table'))) : t('watch.consent.none'),
    c.night ? (c.night.consent
      ? h('span', null, t('watch.consent.nightOnly', {window: night}), ' ', who(c.night.consent, t('watch.consent.nightTable')), t('watch.consent.nightRest'))
      : t('watch.consent.nightNobody', {window: night})) : null,
    c.title_prefix ? h('span', null, t('watch.consent.titlePrefix'), ' ', h('code', {class: 'pre-wrap'}, c.title_prefix)) : null,
    c.body_suffix ? h('span', null, t('watch.consent.bodySuffix'), ' ', h('code', {class: 'pre-wrap'}, c.body_suffix)) : null,
    c.frequency_cap ? t('watch.consent.cap', {cap: c.frequency_cap}) : null,
    c.quiet_hours ? t('watch.consent.quiet', {window: windowText(c.quiet_hours)}) : null,
  ].filter(Boolean);
  return h('ul', {id: 'broadcast-consent', class: 'plain', 'data-category': c.name}, items.map((i) => h('li', null, i)));
}

// chunksView says in the operator's words how the send was split and
// whether a server had to take over; the engineer's counters follow
// behind a toggle.
function chunksView(c) {
  if (!c) return null;
  const servers = c.done_by ? Object.keys(c.done_by).length : 0;
  return h('div', {id: 'broadcast-chunks'},
    h('span', null, t('watch.chunks.summary', {count: c.chunks}),
      servers ? ' ' + t('watch.chunks.servers', {count: servers}) : '',
      c.takeovers ? ' ' + t('watch.chunks.takeovers', {count: c.takeovers}) : ''),
    h('details', {class: 'engineer'},
      h('summary', null, t('watch.engineerDetails')),
      h('code', null, t('watch.chunks.engineer', {chunks: c.chunks, claims: c.claims, takeovers: c.takeovers})),
      c.done_by ? h('ul', {class: 'plain'}, Object.entries(c.done_by).map(([k, v]) => h('li', null, h('code', null, `${k}: ${v}`)))) : null));
}

export function detailsView(b) {
  const link = (n) => h('a', {href: `#/broadcasts/${n}`}, `#${n}`);
  const variants = b.variants && Object.keys(b.variants).length
    ? Object.entries(b.variants).map(([k, v]) => `${k}: ${num(v)}`).join(', ') : null;
  const pace = [b.max_rate != null ? perSecond(b.max_rate) : '', b.deliver_over ? t('watch.pace.over', {over: b.deliver_over}) : ''].filter(Boolean).join(', ');
  return [h('h2', {id: 'details-h'}, t('watch.details.heading')),
    b.error ? h('p', {class: 'alert'}, b.error) : null,
    defList([
      [t('watch.details.app'), apps.several() && b.app ? h('span', {id: 'broadcast-app', 'data-app': b.app}, b.app) : null],
      [t('watch.details.trigger'), h('span', {id: 'broadcast-trigger', title: b.trigger, 'data-value': b.trigger},
        b.job_name ? t('watch.details.triggerJob', {trigger: triggerName(b.trigger), job: b.job_name}) : triggerName(b.trigger))],
      [t('watch.details.createdBy'), b.created_by],
      [t('watch.details.audience'), audienceText(b.audience)],
      [t('watch.details.category'), b.category != null ? h('span', {id: 'broadcast-category'}, b.category) : null],
      [t('watch.details.consentRules'), b.consent ? consentRules(b.consent) : null],
      // Only once it ran: before, nothing was shown anywhere yet.
      [t('watch.details.dryRun'), b.dry_run ? (b.started_at ? t('watch.details.dryRunRan') : t('watch.details.dryRunWill')) : null],
      [t('watch.details.class'), b.class ? enumEl('class', b.class, {id: 'broadcast-class'}) : null],
      [t('watch.details.frequencyCap'), b.frequency_cap || t('watch.details.none')],
      [t('watch.details.pace'), pace || t('watch.details.paceFull')],
      [t('watch.details.resendOf'), b.parent_id ? link(b.parent_id) : null],
      [t('watch.details.created'), timeEl(b.created_at)],
      [t('watch.details.fireTime'), b.fire_time ? timeEl(b.fire_time) : null],
      [t('watch.details.sendAt'), b.send_at ? timeEl(b.send_at) : null],
      [t('watch.details.localTime'), b.send_at_local],
      [t('watch.details.quietHours'), b.quiet_hours ? `${b.quiet_hours.start}–${b.quiet_hours.end}` : null],
      [t('watch.details.startsAt'), b.starts_at ? timeEl(b.starts_at) : null],
      [t('watch.details.holdExpires'), b.hold_expires_at ? timeEl(b.hold_expires_at) : null],
      [t('watch.details.released'), b.released_at ? h('span', null, timeEl(b.released_at), b.released_by ? ' ' + t('watch.details.by', {who: b.released_by}) : '') : null],
      [t('watch.details.canceledBy'), b.canceled_by || null],
      [t('watch.details.started'), timeEl(b.started_at)],
      [t('watch.details.finished'), timeEl(b.finished_at)],
      [t('watch.details.expectedFinish'), b.expected_finish_at ? timeEl(b.expected_finish_at) : null],
      [t('watch.details.duration'), b.duration_ms != null ? duration(b.duration_ms) : null],
      [t('watch.details.invalidated'), num(b.invalidated_tokens)],
      [t('watch.details.deferred'), b.deferred != null ? num(b.deferred) : null],
      [t('watch.details.noConsent'), b.category != null ? countEl('excluded_no_consent', b.excluded_no_consent) : null],
      [t('watch.details.nightDeferred'), b.consent?.night ? h('span', null, countEl('night_deferred', b.night_deferred),
        b.night_deferred ? ' ' + (isFinal(b.status) ? t('watch.details.nightHeld') : t('watch.details.nightWaiting')) : '') : null],
      [t('watch.details.zoneFallbacks'), b.zone_fallbacks ? num(b.zone_fallbacks) : null],
      [t('watch.details.variantsSent'), variants],
      [t('watch.details.chunks'), chunksView(b.chunks)],
      [t('watch.details.requestId'), b.request_id ? h('code', null, b.request_id) : null],
    ])];
}
