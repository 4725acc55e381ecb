// The values present in the data for a segment field (GET
// /push/segments/values): the builder offers them for a condition's
// value, the most common first, each with its devices, so that an
// operator picks a locale the users have rather than guesses one. Typing
// another value stays allowed.
//
// Each field's values are fetched once per builder page (its first
// condition on the field asks; the others share the answer), and only
// for the kinds that have values to suggest (string, version, bool): the
// API refuses the others. A failed read leaves the builder's common
// values in their place.

import {get} from './api.js';
import {num, compactNum} from './format.js';
import {t} from './i18n.js';

const SUGGESTIBLE = new Set(['string', 'version', 'bool']);

// createValues(signal) returns valuesOf(field): a promise of
// {values: [{value, tokens}], sampled}, or of null when there are none to
// ask for or the read failed.
export function createValues(signal) {
  const asked = new Map();
  return function valuesOf(f) {
    if (!f || !SUGGESTIBLE.has(f.kind)) return Promise.resolve(null);
    if (!asked.has(f.name)) {
      asked.set(f.name, get(`/push/segments/values?field=${encodeURIComponent(f.name)}`, {signal})
        .then((r) => ({values: Array.isArray(r.values) ? r.values : [], sampled: Boolean(r.sampled)}), () => null));
    }
    return asked.get(f.name);
  };
}

// devices(tokens, sampled): "1,204 devices", "≈ 1,204 devices" from a
// sample.
export function devices(tokens, sampled) {
  return `${sampled ? '≈ ' : ''}${t('segcount.devices', {count: tokens, n: num(tokens)})}`;
}

// shortDevices(tokens, sampled): a chip's count, "1.2K", "≈ 1.2K".
export function shortDevices(tokens, sampled) {
  return `${sampled ? '≈ ' : ''}${compactNum(tokens)}`;
}
