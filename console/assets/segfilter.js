// A segment's filter (docs/segments.md) as operators read it: the fields'
// names, the operators in words, a filter told as a sentence, and the
// builder's tree (groups of conditions) to and from the API's JSON.
//
// The API's filter is {"and": [...]}, {"or": [...]}, {"not": F} or a
// condition {"field", "op", "value"}. The builder shows groups instead:
// "All of" is and, "Any of" is or, "None of" is not around an or (or
// around its one child), so every filter the builder makes reads back as
// the same groups.

import {t} from './i18n.js';
import {dateTimeText} from './format.js';

// The built-in fields' names; an attribute (attributes.plan) is its own
// name, marked as the user's. Functions, not tables: the words are the
// chosen language's, known once the catalog has loaded.
const FIELD_ORDER = ['platform', 'app_version', 'locale', 'timezone', 'app', 'last_seen', 'user_id'];
const fieldLabels = () => ({
  platform: t('seg.field.platform'),
  app_version: t('seg.field.appVersion'),
  locale: t('seg.field.locale'),
  timezone: t('seg.field.timezone'),
  app: t('seg.field.app'),
  last_seen: t('seg.field.lastSeen'),
  user_id: t('seg.field.userId'),
});
export const ATTRIBUTE = 'attributes.';

export function fieldLabel(name) {
  const labels = fieldLabels();
  if (labels[name]) return labels[name];
  if (String(name).startsWith(ATTRIBUTE)) {
    const n = name.slice(ATTRIBUTE.length).replaceAll('_', ' ');
    return n.charAt(0).toUpperCase() + n.slice(1);
  }
  return String(name);
}

// The fields in the order the picker lists them: the built-in ones as
// above, then the attributes by name.
export function sortFields(fields) {
  const rank = (f) => {
    const i = FIELD_ORDER.indexOf(f.name);
    return i < 0 ? FIELD_ORDER.length : i;
  };
  return [...fields].sort((a, b) => rank(a) - rank(b) || a.name.localeCompare(b.name));
}

// The operators in words, by kind: the picker lists a kind's own (the
// ones GET /push/segments/fields says it takes, in this order). "exists"
// is two choices: has a value, has none. On dates, gt and lt say what
// after and before say, so only the latter are offered.
const words = () => ({
  eq: t('seg.op.eq'),
  ne: t('seg.op.ne'),
  in: t('seg.op.in'),
  nin: t('seg.op.nin'),
  exists_true: t('seg.op.existsTrue'),
  exists_false: t('seg.op.existsFalse'),
  // Of a field whose kind is not known here (a broadcast's segment on a
  // page without the fields).
  gt: t('seg.op.gt'),
  gte: t('seg.op.gte'),
  lt: t('seg.op.lt'),
  lte: t('seg.op.lte'),
  before: t('seg.op.before'),
  after: t('seg.op.after'),
  within: t('seg.op.within'),
  not_within: t('seg.op.notWithin'),
});
// The built-in fields' kinds, for words without the fields' list.
const BUILTIN_KINDS = {platform: 'string', locale: 'string', timezone: 'string', app: 'string', last_seen: 'time', app_version: 'version', user_id: 'int'};
const ORDERED = {
  string: ['eq', 'ne', 'in', 'nin', 'gt', 'gte', 'lt', 'lte'],
  int: ['eq', 'ne', 'in', 'nin', 'gt', 'gte', 'lt', 'lte'],
  version: ['eq', 'ne', 'gte', 'gt', 'lte', 'lt', 'in', 'nin'],
  bool: ['eq', 'ne'],
  date: ['eq', 'ne', 'after', 'gte', 'before', 'lte', 'within', 'not_within'],
  time: ['within', 'not_within', 'before', 'after'],
};
const kindWords = () => ({
  string: {gt: t('seg.op.string.gt'), gte: t('seg.op.string.gte'), lt: t('seg.op.string.lt'), lte: t('seg.op.string.lte')},
  int: {gt: t('seg.op.int.gt'), gte: t('seg.op.gte'), lt: t('seg.op.int.lt'), lte: t('seg.op.lte')},
  version: {gt: t('seg.op.version.gt'), gte: t('seg.op.gte'), lt: t('seg.op.version.lt'), lte: t('seg.op.lte')},
  date: {after: t('seg.op.after'), gte: t('seg.op.date.gte'), before: t('seg.op.before'), lte: t('seg.op.date.lte'), within: t('seg.op.within'), not_within: t('seg.op.notWithin')},
  time: {within: t('seg.op.within'), not_within: t('seg.op.notWithin'), before: t('seg.op.before'), after: t('seg.op.after')},
});
// Last seen reads as people say it: "Last seen within the last 30 days".
const lastSeen = () => ({within: t('seg.op.lastSeen.within'), not_within: t('seg.op.lastSeen.notWithin'), before: t('seg.op.lastSeen.before'), after: t('seg.op.lastSeen.after')});

// The op choices of a field {name, kind, ops}: [[choice, words]], where a
// choice is an op, or exists_true / exists_false.
export function opChoices(f) {
  const takes = new Set(f.ops || []);
  const out = (ORDERED[f.kind] || f.ops || []).filter((op) => takes.has(op)).map((op) => [op, opWords(f, op)]);
  if (takes.has('exists')) out.push(['exists_true', words().exists_true], ['exists_false', words().exists_false]);
  return out;
}

export function opWords(f, op) {
  if (f.name === 'last_seen' && lastSeen()[op]) return lastSeen()[op];
  return kindWords()[f.kind]?.[op] || words()[op] || op;
}

// The value an op takes: none, a list, a duration, a date, an instant,
// yes or no, or one value.
export function valueShape(kind, op) {
  if (op === 'exists_true' || op === 'exists_false') return 'none';
  if (op === 'in' || op === 'nin') return 'list';
  if (op === 'within' || op === 'not_within') return 'duration';
  if (kind === 'bool') return 'bool';
  if (kind === 'date') return 'date';
  if (kind === 'time') return 'instant';
  return 'one';
}

// The units of a duration, as the API writes them ("30d").
export const units = () => [['m', t('seg.unit.minutes')], ['h', t('seg.unit.hours')], ['d', t('seg.unit.days')], ['w', t('seg.unit.weeks')]];

// "30d" → "30 days"
export function durationWords(v) {
  const m = String(v).match(/^(\d+)([mhdw])$/);
  if (!m) return String(v);
  const count = Number(m[1]);
  switch (m[2]) {
    case 'm': return t('seg.dur.minutes', {count});
    case 'h': return t('seg.dur.hours', {count});
    case 'd': return t('seg.dur.days', {count});
    default: return t('seg.dur.weeks', {count});
  }
}

// ---- The tree -------------------------------------------------------------

// A group {type: 'group', mode: 'all' | 'any' | 'none', children}; a
// condition {type: 'cond', field, op, value} with op a choice (above) and
// value as the API has it.
export const modes = () => [['all', t('seg.mode.all')], ['any', t('seg.mode.any')], ['none', t('seg.mode.none')]];

export function newGroup(mode = 'all', children = []) {
  return {type: 'group', mode, children};
}

export function newCond(field = '', op = '', value = undefined) {
  return {type: 'cond', field, op, value};
}

// The API's filter → the builder's tree; the top is always a group.
export function fromFilter(f) {
  const node = toNode(f);
  return node.type === 'group' ? node : newGroup('all', [node]);
}

function toNode(f) {
  if (f && Array.isArray(f.and)) return newGroup('all', f.and.map(toNode));
  if (f && Array.isArray(f.or)) return newGroup('any', f.or.map(toNode));
  if (f && f.not) {
    if (Array.isArray(f.not.or)) return newGroup('none', f.not.or.map(toNode));
    return newGroup('none', [toNode(f.not)]);
  }
  const c = f || {};
  const op = c.op === 'exists' ? (c.value === false ? 'exists_false' : 'exists_true') : c.op;
  return newCond(c.field || '', op || '', c.value);
}

// The tree → the API's filter, writing on each node the path the API
// names its mistakes by (filter.and[2].op). conds maps a condition to its
// API form (or null while it is unfinished); an empty group is null too.
export function toFilter(node, conds, path = 'filter') {
  node.path = path;
  if (node.type === 'cond') return conds(node);
  if (node.mode === 'none' && node.children.length === 1) {
    const c = toFilter(node.children[0], conds, path + '.not');
    return c == null ? null : {not: c};
  }
  const key = node.mode === 'all' ? 'and' : 'or';
  const base = node.mode === 'none' ? path + '.not.or' : path + '.' + key;
  const kids = node.children.map((c, i) => toFilter(c, conds, `${base}[${i}]`));
  if (!kids.length || kids.some((k) => k == null)) return null;
  return node.mode === 'none' ? {not: {or: kids}} : {[key]: kids};
}

// ---- In words -------------------------------------------------------------

// A filter as nested lists of sentences, for the segments' pages: nodes
// built with h (dom.js); fields is the fields' list (for the kinds).
export function describe(h, f, fields) {
  const kinds = Object.fromEntries((fields || []).map((x) => [x.name, x]));
  const tree = fromFilter(f);
  const sentence = (node) => {
    if (node.type === 'cond') {
      const fld = kinds[node.field] || {name: node.field, kind: BUILTIN_KINDS[node.field] || ''};
      return h('li', {class: 'seg-words-cond'}, h('strong', null, fieldLabel(node.field)), ' ', opWords(fld, node.op), valueWords(fld, node.op, node.value));
    }
    const label = modes().find(([m]) => m === node.mode)[1];
    return h('li', {class: 'seg-words-group'}, t('seg.groupLabel', {mode: label}), h('ul', null, node.children.map(sentence)));
  };
  return h('ul', {class: 'seg-words'}, sentence(tree));
}

function valueWords(f, op, v) {
  switch (valueShape(f.kind, op)) {
    case 'none': return '';
    case 'list': return ' ' + (Array.isArray(v) ? v.map(String).join(', ') : String(v));
    case 'duration': return ' ' + durationWords(v);
    case 'bool': return ' ' + (v ? t('common.yes') : t('common.no'));
    case 'instant': {
      const d = new Date(v);
      return ' ' + (Number.isNaN(d.getTime()) ? String(v) : dateTimeText(d));
    }
    default: return ' ' + String(v);
  }
}
