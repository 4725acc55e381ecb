// The console's words: every string it shows comes from one catalog per
// language (i18n/en.json, i18n/ko.json), looked up by key with t().
//
// The language is the one chosen with the switcher (kept in localStorage),
// else the browser's first language the console speaks, else English.
// Numbers and dates are formatted in that language's conventions too
// (format.js asks locale()). A key missing from the chosen language falls
// back to English and is recorded in window.pushfanMissingKeys, which the
// browser tests read; i18n_test.go checks the two catalogs hold the same
// keys with the same {placeholders}.

export const LANGS = [
  {code: 'en', name: 'English'},
  {code: 'ko', name: '한국어'},
];

const STORE_KEY = 'pushfan.lang';

let current = 'en';
let catalog = {};
let english = {};
const missing = new Set();
window.pushfanMissingKeys = [];

// The language the console speaks now ("en" or "ko").
export function lang() {
  return current;
}

// The BCP 47 tag for Intl formatters: the chosen language, refined by the
// browser's region when it matches ("ko-KR", "en-GB").
export function locale() {
  const match = (navigator.languages || []).find((l) => l.toLowerCase().split('-')[0] === current);
  return match || current;
}

function choose() {
  const known = new Set(LANGS.map((l) => l.code));
  let stored = null;
  try {
    stored = localStorage.getItem(STORE_KEY);
  } catch {
    // storage refused (a private window's policy): the browser decides
  }
  if (stored && known.has(stored)) return stored;
  for (const l of navigator.languages || [navigator.language || 'en']) {
    const base = String(l).toLowerCase().split('-')[0];
    if (known.has(base)) return base;
  }
  return 'en';
}

async function fetchCatalog(code) {
  const res = await fetch(`./i18n/${code}.json`, {cache: 'no-cache'});
  if (!res.ok) throw new Error(`the ${code} catalog answered ${res.status}`);
  return res.json();
}

// load() picks the language and fetches its catalog (and English, the
// fallback); app.js awaits it before showing anything.
export async function load() {
  current = choose();
  english = await fetchCatalog('en');
  catalog = current === 'en' ? english : await fetchCatalog(current).catch(() => {
    current = 'en';
    return english;
  });
  document.documentElement.lang = current;
}

// setLang switches and shows the page again from scratch, so every string
// on screen (and every formatter) is the new language's.
export function setLang(code) {
  try {
    localStorage.setItem(STORE_KEY, code);
  } catch {
    // not kept: the switch lasts for this page load only
  }
  location.reload();
}

const pluralRules = new Map();

function plural(forms, count) {
  let rules = pluralRules.get(current);
  if (!rules) {
    rules = new Intl.PluralRules(current);
    pluralRules.set(current, rules);
  }
  return forms[rules.select(count)] ?? forms.other;
}

let numberFmt = null;

function fmtValue(v) {
  if (typeof v === 'number') {
    numberFmt ??= new Intl.NumberFormat(locale());
    return numberFmt.format(v);
  }
  return v == null ? '' : String(v);
}

// t(key) → the text in the chosen language; t(key, {count: 3}) also fills
// {count}. A message may be {"one": "...", "other": "..."}: the form is
// chosen by vars.count under the language's plural rules (Korean has only
// "other"). Numbers in vars are formatted in the viewer's locale.
export function t(key, vars) {
  let msg = catalog[key];
  if (msg == null) {
    if (!missing.has(key)) {
      missing.add(key);
      window.pushfanMissingKeys.push(`${current}:${key}`);
    }
    msg = english[key] ?? key;
  }
  if (typeof msg === 'object') msg = plural(msg, Number(vars?.count ?? 0));
  if (!vars) return msg;
  return msg.replace(/\{(\w+)\}/g, (all, name) => (name in vars ? fmtValue(vars[name]) : all));
}

// tOr(key, raw) is t(key) for a key built from a value the API sent (a
// status, a trigger, an outcome): the value's words when the catalog has
// them, else the value as the server wrote it (a newer server's value),
// never a missing key.
export function tOr(key, raw) {
  return catalog[key] != null || english[key] != null ? t(key) : String(raw ?? '');
}
