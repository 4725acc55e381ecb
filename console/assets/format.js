// Formatting of times and numbers, and parsing of what people type.
//
// Times are shown in the viewer's zone (the browser's), with the UTC value
// on hover, since the API and the logs speak UTC.

import {h} from './dom.js';
import {locale, t} from './i18n.js';

// Made on first use: the language is known only once i18n.load() ran.
let fmts = null;
function formats() {
  fmts ??= {
    number: new Intl.NumberFormat(locale()),
    dateTime: new Intl.DateTimeFormat(locale(), {dateStyle: 'short', timeStyle: 'medium'}),
    clock: new Intl.DateTimeFormat(locale(), {timeStyle: 'medium'}),
    compact: new Intl.NumberFormat(locale(), {notation: 'compact', maximumFractionDigits: 1}),
  };
  return fmts;
}

export function num(n) {
  return n == null || Number.isNaN(n) ? '—' : formats().number.format(n);
}

// 1234567 → "1.2M" (en), "123만" (ko): a short count for chips and estimates.
export function compactNum(n) {
  return n == null || Number.isNaN(n) ? '—' : formats().compact.format(n);
}

// A date and time in the viewer's locale, as text (not a <time>).
export function dateTimeText(d) {
  return formats().dateTime.format(d);
}

// "2026-12-01 15:04:05Z": the UTC form shown in a <time>'s title.
export function utc(d) {
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

// <time datetime="ISO" title="UTC: ...">local short date and time</time>,
// or a dash for an absent time.
export function timeEl(iso, opts = {}) {
  if (!iso) return h('span', {class: 'muted'}, '—');
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return h('span', null, String(iso));
  const fmt = opts.clock ? formats().clock : formats().dateTime;
  return h('time', {datetime: d.toISOString(), title: t('format.utc', {time: utc(d)})}, fmt.format(d));
}

export function clock(d) {
  return formats().clock.format(d);
}

// 83456 → "1m 23.5s": durations of sends are seconds to hours.
export function duration(ms) {
  if (ms == null) return '—';
  if (ms < 1000) return t('format.ms', {n: Math.round(ms)});
  let secs = ms / 1000;
  const parts = [];
  const hrs = Math.floor(secs / 3600);
  if (hrs) parts.push(t('format.h', {n: hrs}));
  secs -= hrs * 3600;
  const mins = Math.floor(secs / 60);
  if (mins) parts.push(t('format.m', {n: mins}));
  secs -= mins * 60;
  if (secs >= 0.05 || !parts.length) parts.push(t('format.s', {n: hrs ? Math.round(secs) : Math.round(secs * 10) / 10}));
  return parts.join(' ');
}

export function perSecond(n) {
  if (n == null) return '—';
  return t('format.perSecond', {n: new Intl.NumberFormat(locale(), {maximumFractionDigits: n < 10 ? 1 : 0}).format(n)});
}

export function percent(ratio) {
  return new Intl.NumberFormat(locale(), {style: 'percent', maximumFractionDigits: 1}).format(ratio);
}

const pad = (n, w = 2) => String(n).padStart(w, '0');

// A datetime-local value ("2026-12-24T09:00"), read in the viewer's zone,
// as RFC 3339 with that zone's offset at that instant ("...+01:00"), which
// is what send_at wants.
export function localInputToRFC3339(value) {
  const d = new Date(value);
  if (!value || Number.isNaN(d.getTime())) return null;
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? '+' : '-';
  const a = Math.abs(off);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:` +
    `${pad(d.getMinutes())}:${pad(d.getSeconds())}${sign}${pad(Math.floor(a / 60))}:${pad(a % 60)}`;
}

// The other way, for prefilling a datetime-local input from an API time.
export function isoToLocalInput(iso) {
  const d = new Date(iso);
  if (!iso || Number.isNaN(d.getTime())) return '';
  const secs = d.getSeconds() ? ':' + pad(d.getSeconds()) : '';
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}${secs}`;
}

// send_at_local values carry seconds; a datetime-local input takes them
// but people read "09:00" better than "09:00:00".
export function localValue(v) {
  return (v || '').replace(/^(\d{4}-\d\d-\d\dT\d\d:\d\d):00$/, '$1');
}

// "1, 2 3\n4" → [1, 2, 3, 4]. Throws with the offending piece so the form
// can say which one is wrong.
export function parseIds(text) {
  const parts = String(text || '').split(/[\s,;]+/).filter(Boolean);
  return parts.map((p) => {
    if (!/^\d+$/.test(p) || Number(p) < 1 || !Number.isSafeInteger(Number(p))) {
      throw new Error(t('format.notUserId', {value: p}));
    }
    return Number(p);
  });
}

// A named audience parameter from its text input, by the type the audience
// declares: "int", "string", "bool", "date", "time", or a list of one of
// them ("[]int"), typed separated by commas. Throws a readable error.
export function parseParam(type, raw) {
  const ty = String(type || 'string').trim();
  if (ty.startsWith('[]')) {
    const inner = ty.slice(2);
    const text = String(raw).trim();
    if (!text) return [];
    return text.split(',').map((p) => parseParam(inner, p.trim()));
  }
  const v = String(raw);
  switch (ty) {
    case 'int':
    case 'int64':
    case 'integer': {
      const x = v.trim();
      if (!/^-?\d+$/.test(x) || !Number.isSafeInteger(Number(x))) throw new Error(t('format.notWhole', {value: v}));
      return Number(x);
    }
    case 'float':
    case 'float64':
    case 'number': {
      const x = v.trim();
      if (x === '' || !Number.isFinite(Number(x))) throw new Error(t('format.notNumber', {value: v}));
      return Number(x);
    }
    case 'bool':
    case 'boolean': {
      const x = v.trim().toLowerCase();
      if (['true', '1', 'yes', 'on'].includes(x)) return true;
      if (['false', '0', 'no', 'off'].includes(x)) return false;
      throw new Error(t('format.notBool', {value: v}));
    }
    case 'date': {
      const x = v.trim();
      if (!/^\d{4}-\d\d-\d\d$/.test(x)) throw new Error(t('format.notDate', {value: v}));
      return x;
    }
    case 'time': {
      // Times go to the server as typed: it knows which forms it accepts.
      const x = v.trim();
      if (!x) throw new Error(t('format.timeRequired'));
      return x;
    }
    default:
      return v;
  }
}

// What a parameter's type means, for the hint next to its input.
export function paramHint(type) {
  const ty = String(type || 'string');
  if (ty.startsWith('[]')) return t('format.hint.list', {type: ty, each: typeWords(ty.slice(2))});
  return `${ty}: ${typeWords(ty)}`;
}

// What a value of a parameter's type is, in words.
function typeWords(ty) {
  switch (ty) {
    case 'int': case 'int64': case 'integer': return t('format.hint.int');
    case 'bool': case 'boolean': return t('format.hint.bool');
    case 'date': return t('format.hint.date');
    case 'time': return t('format.hint.time');
    case 'number': case 'float': case 'float64': return t('format.hint.number');
    default: return t('format.hint.text');
  }
}

export const FINAL = new Set(['completed', 'canceled', 'failed']);
export const isFinal = (status) => FINAL.has(status);
