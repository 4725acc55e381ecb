// A cron job's schedule in words, for the common forms: "0 0 9 * * *" is
// "every day at 09:00". Six fields have a leading seconds field, five do
// not; descriptors (@daily, @every 1h) are named. An uncommon form
// answers null, and the page shows the spec as written. The words come
// from the catalog (cron.sched.*), weekday names from Intl in the
// viewer's language.

import {t, locale} from './i18n.js';

const NUM = /^\d+$/;
const DAYS = {SUN: 0, MON: 1, TUE: 2, WED: 3, THU: 4, FRI: 5, SAT: 6};

const pad = (n) => String(n).padStart(2, '0');

// "1-5", "MON,WED", "0" → [1..5], [1, 3], [0]; null for a step or other form.
function dayList(field) {
  const out = [];
  for (const part of field.toUpperCase().split(',')) {
    const range = part.split('-');
    const val = (x) => (NUM.test(x) ? Number(x) % 7 : DAYS[x]);
    if (range.length === 1 && val(range[0]) != null) {
      out.push(val(range[0]));
    } else if (range.length === 2 && val(range[0]) != null && val(range[1]) != null) {
      for (let d = val(range[0]); d <= val(range[1]); d++) out.push(d);
    } else {
      return null;
    }
  }
  return [...new Set(out)].sort((a, b) => a - b);
}

function dayNames(days) {
  // 2024-01-07 was a Sunday.
  const fmt = new Intl.DateTimeFormat(locale(), {weekday: 'long', timeZone: 'UTC'});
  const names = days.map((d) => fmt.format(new Date(Date.UTC(2024, 0, 7 + d))));
  return new Intl.ListFormat(locale(), {type: 'conjunction'}).format(names);
}

// "09:00", "09:00, 18:30": the times of the hour and minute fields, or null.
function times(hour, minute, second) {
  if (!NUM.test(minute) || !(second === '0' || second === '00')) return null;
  const hours = hour.split(',');
  if (!hours.every((x) => NUM.test(x))) return null;
  return new Intl.ListFormat(locale(), {type: 'conjunction'}).format(hours.map((x) => `${pad(x)}:${pad(minute)}`));
}

export function describeSchedule(spec) {
  const s = String(spec || '').trim();
  if (s.startsWith('@')) {
    const [d, ...rest] = s.split(/\s+/);
    switch (d) {
      case '@yearly': case '@annually': return t('cron.sched.yearly');
      case '@monthly': return t('cron.sched.monthly', {day: 1, time: '00:00'});
      case '@weekly': return t('cron.sched.weekly', {days: dayNames([0]), time: '00:00'});
      case '@daily': case '@midnight': return t('cron.sched.daily', {time: '00:00'});
      case '@hourly': return t('cron.sched.hourly', {minute: '00'});
      case '@every': return rest.length === 1 ? t('cron.sched.everyDuration', {duration: rest[0]}) : null;
      default: return null;
    }
  }
  let f = s.split(/\s+/);
  if (f.length === 5) f = ['0', ...f];
  if (f.length !== 6) return null;
  const [sec, min, hour, dom, mon, dow] = f;
  const any = (x) => x === '*' || x === '?';
  if (!any(mon)) return null;
  const step = (x) => (/^\*\/\d+$/.test(x) ? Number(x.slice(2)) : null);
  const calendarAny = any(dom) && any(dow);
  if (calendarAny && any(hour) && any(min)) {
    if (any(sec)) return t('cron.sched.everySecond');
    if (step(sec)) return step(sec) === 1 ? t('cron.sched.everySecond') : t('cron.sched.everySeconds', {n: step(sec)});
    if (sec === '0') return t('cron.sched.everyMinute');
    return null;
  }
  if (!(sec === '0' || sec === '00')) return null;
  if (calendarAny && any(hour) && step(min)) {
    return step(min) === 1 ? t('cron.sched.everyMinute') : t('cron.sched.everyMinutes', {n: step(min)});
  }
  if (calendarAny && any(hour) && NUM.test(min)) return t('cron.sched.hourly', {minute: pad(min)});
  if (calendarAny && step(hour) && NUM.test(min)) return t('cron.sched.everyHours', {n: step(hour), minute: pad(min)});
  const at = times(hour, min, sec);
  if (!at) return null;
  if (calendarAny) return t('cron.sched.daily', {time: at});
  if (any(dom)) {
    const days = dayList(dow);
    if (!days) return null;
    if (days.join() === '1,2,3,4,5') return t('cron.sched.weekdays', {time: at});
    return t('cron.sched.weekly', {days: dayNames(days), time: at});
  }
  if (any(dow) && NUM.test(dom)) return t('cron.sched.monthly', {day: Number(dom), time: at});
  return null;
}
