// The count of a segment's filter (POST /push/segments/preview): on a big
// table the first answer is an estimate ("≈ 1.2M devices (estimate)"),
// then the exact count is asked for and replaces it; with the users and a
// sample of their ids. A newer count aborts the one under way, so a slow
// answer never overwrites a newer filter's.
//
// The box says where it is in data-state (idle, counting, estimate, exact,
// error) and the numbers in data-tokens and data-users, for tests.

import {post} from './api.js';
import {h, fill, isQuiet} from './dom.js';
import {num, compactNum} from './format.js';
import {t} from './i18n.js';

// createCounter(out, signal, onError): count(filter) counts into out;
// idle(text) shows why there is nothing to count. onError(err) gets an
// API refusal (a 400 naming the filter's path) to show where it belongs;
// the box then says the filter needs fixing.
export function createCounter(out, signal, onError) {
  let ctl = null;
  signal.addEventListener('abort', () => ctl?.abort());

  function state(s, tokens, users) {
    out.dataset.state = s;
    if (tokens == null) {
      delete out.dataset.tokens;
      delete out.dataset.users;
    } else {
      out.dataset.tokens = String(tokens);
      out.dataset.users = String(users);
    }
  }

  function idle(text) {
    ctl?.abort();
    ctl = null;
    state('idle');
    fill(out, h('span', {class: 'muted'}, text));
  }

  async function count(filter) {
    ctl?.abort();
    const mine = new AbortController();
    ctl = mine;
    state('counting');
    out.setAttribute('aria-busy', 'true');
    fill(out, h('span', {class: 'muted'}, t('common.counting')));
    try {
      let r = await post('/push/segments/preview', {filter}, {signal: mine.signal});
      if (mine !== ctl) return;
      if (!r.exact) {
        state('estimate', r.tokens, r.users);
        fill(out, h('strong', {class: 'count'}, t('segcount.estDevices', {count: r.tokens, n: compactNum(r.tokens)})),
          ' ', t('segcount.estUsers', {count: r.users, n: compactNum(r.users)}), h('span', {class: 'muted'}, ' · ', t('segcount.countingExactly')), sample(r));
        r = await post('/push/segments/preview', {filter, exact: true}, {signal: mine.signal});
        if (mine !== ctl) return;
      }
      state('exact', r.tokens, r.users);
      fill(out, h('strong', {class: 'count', id: 'count-tokens'}, t('segcount.devices', {count: r.tokens, n: num(r.tokens)})),
        ' · ', t('segcount.users', {count: r.users, n: num(r.users)}), sample(r));
    } catch (err) {
      if (mine !== ctl || isQuiet(err)) return;
      state('error');
      if (err.status === 400 && err.field && onError) {
        onError(err);
        fill(out, h('span', {class: 'error-text'}, t('segcount.fixBelow')));
      } else {
        fill(out, h('span', {class: 'error-text'}, t('segcount.failed', {message: err.message})));
      }
    } finally {
      if (mine === ctl) out.removeAttribute('aria-busy');
    }
  }

  return {count, idle};
}

function sample(r) {
  const ids = r.sample || [];
  if (!ids.length) return null;
  return h('span', {class: 'seg-sample'}, h('br'), t('segcount.someOfThem'), ' ',
    h('span', {class: 'mono', id: 'count-sample'}, ids.map((id) => t('segcount.user', {id: String(id)})).join(', ')));
}

// A count of a saved filter, once (the segment's page).
export function countLine(out, filter, signal) {
  createCounter(out, signal).count(filter);
}
