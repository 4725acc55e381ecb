// Boot, hash router and the header (nav, who is signed in, sign out).
//
// Each page module exports render(ctx) and resolves once it has shown its
// first data; only then is body[data-page] set, so tests (and people) can
// tell a rendered page from a loading one. ctx.signal is aborted and the
// ctx.cleanup() callbacks run when the user leaves the page, which stops
// the page's fetches, timers and event streams.

import {api, getSession, setSession, onUnauthorized, del, may} from './api.js';
import {h, showPageError, closeDialog, fill, add, roleTag} from './dom.js';
import * as apps from './apps.js';
import * as signin from './signin.js';
import * as dashboard from './dashboard.js';
import * as broadcasts from './broadcasts.js';
import * as watch from './watch.js';
import * as compose from './compose.js';
import * as cron from './cron.js';
import * as audiences from './audiences.js';
import * as segments from './segments.js';
import * as segbuilder from './segbuilder.js';
import * as cluster from './cluster.js';
import * as webhooks from './webhooks.js';
import * as keys from './keys.js';
import * as activity from './activity.js';
import * as users from './users.js';
import * as campaigns from './campaigns.js';
import * as i18n from './i18n.js';
import {t} from './i18n.js';

// Titles are functions: the catalog is loaded only at boot.
const ROUTES = [
  {re: /^\/$/, page: 'dashboard', title: () => t('nav.dashboard'), mod: dashboard},
  {re: /^\/broadcasts$/, page: 'broadcasts', title: () => t('nav.broadcasts'), mod: broadcasts},
  {re: /^\/broadcasts\/([1-9]\d*)$/, page: 'watch', title: () => t('app.title.broadcast'), mod: watch},
  {re: /^\/compose$/, page: 'compose', title: () => t('nav.compose'), mod: compose},
  {re: /^\/cron$/, page: 'cron', title: () => t('nav.cron'), mod: cron},
  {re: /^\/audiences$/, page: 'audiences', title: () => t('nav.audiences'), mod: audiences},
  // A segment's name starts with a letter: _new is no segment's.
  {re: /^\/segments$/, page: 'segments', title: () => t('nav.segments'), mod: segments},
  {re: /^\/segments\/_new$/, page: 'segment-builder', title: () => t('app.title.newSegment'), mod: segbuilder},
  {re: /^\/segments\/([a-z][a-z0-9_-]*)\/edit$/, page: 'segment-builder', title: () => t('app.title.editSegment'), mod: segbuilder},
  {re: /^\/segments\/([a-z][a-z0-9_-]*)$/, page: 'segment', title: () => t('app.title.segment'), mod: segments},
  {re: /^\/cluster$/, page: 'cluster', title: () => t('nav.cluster'), mod: cluster},
  {re: /^\/webhooks$/, page: 'webhooks', title: () => t('nav.webhooks'), mod: webhooks},
  {re: /^\/webhooks\/([^/]+)$/, page: 'webhooks', title: () => t('app.title.webhook'), mod: webhooks},
  {re: /^\/keys$/, page: 'keys', title: () => t('app.title.keys'), mod: keys},
  {re: /^\/activity$/, page: 'activity', title: () => t('nav.activity'), mod: activity},
  {re: /^\/users$/, page: 'users', title: () => t('app.title.users'), mod: users},
  {re: /^\/campaigns$/, page: 'campaigns', title: () => t('campaigns.title'), mod: campaigns},
  {re: /^\/signin$/, page: 'signin', title: () => t('app.title.signin'), mod: signin},
];

// The nav, in order; Compose only for senders and above, Keys only for
// admins (absent, not hidden, for the others).
const NAV = () => [
  ['#/', t('nav.dashboard')],
  ['#/broadcasts', t('nav.broadcasts')],
  ['#/campaigns', t('nav.campaigns')],
  ['#/compose', t('nav.compose'), 'sender'],
  ['#/cron', t('nav.cron')],
  ['#/segments', t('nav.segments')],
  ['#/audiences', t('nav.audiences')],
  ['#/users', t('nav.users'), null, 'every-app'],
  ['#/cluster', t('nav.cluster')],
  ['#/webhooks', t('nav.webhooks'), null, 'every-app'],
  ['#/keys', t('nav.keys'), 'admin', 'every-app'],
  ['#/activity', t('nav.activity'), 'admin'],
];

let active = null; // the page on screen: {controller, cleanups}
let expiryTimer = 0;
let flash = ''; // a message for the sign-in page ("your session expired")

function parseHash() {
  const raw = location.hash.slice(1);
  const i = raw.indexOf('?');
  let path = i < 0 ? raw : raw.slice(0, i);
  try {
    path = decodeURIComponent(path);
  } catch {
    // a malformed escape: route the raw text (it will be "not found")
  }
  path = path || '/';
  // URLSearchParams decodes the query itself (next=%23%2Fbroadcasts).
  const query = new URLSearchParams(i < 0 ? '' : raw.slice(i + 1));
  return {path: path.startsWith('/') ? path : '/' + path, query};
}

function currentHash() {
  return location.hash || '#/';
}

function teardown() {
  if (!active) return;
  active.controller.abort();
  for (const fn of active.cleanups) {
    try {
      fn();
    } catch {
      // a cleanup that fails must not keep the next page from showing
    }
  }
  active = null;
  closeDialog();
}

async function route() {
  teardown();
  delete document.body.dataset.page;
  const {path, query} = parseHash();
  const session = getSession();

  if (!session && path !== '/signin') {
    location.replace('#/signin?next=' + encodeURIComponent(currentHash()));
    return;
  }
  if (session && path === '/signin') {
    location.replace(safeNext(query.get('next')));
    return;
  }

  const root = document.getElementById('app');
  root.replaceChildren();
  markNav(path);

  const controller = new AbortController();
  const me = {controller, cleanups: []};
  active = me;
  const found = ROUTES.map((r) => ({r, m: path.match(r.re)})).find((x) => x.m);
  const ctx = {
    root,
    query,
    params: found ? found.m.slice(1) : [],
    session,
    signal: controller.signal,
    cleanup: (fn) => me.cleanups.push(fn),
    // signin.js calls this with the new session object.
    signedIn: (s) => signedIn(s, query.get('next')),
    flash: takeFlash(),
  };

  if (!found) {
    document.title = `${t('app.notFound')} · pushfan`;
    add(root, h('h1', {tabindex: '-1'}, t('app.notFound')));
    showPageError(root, new Error(t('app.noPage', {hash: currentHash()})));
    document.body.dataset.page = 'notfound';
    return;
  }

  document.title = `${found.r.title()} · pushfan`;
  try {
    await found.r.mod.render(ctx);
  } catch (err) {
    if (controller.signal.aborted) return;
    showPageError(root, err);
  }
  if (controller.signal.aborted || active !== me) return;
  document.body.dataset.page = found.r.page;
  // Move focus to the new page's heading so keyboard and screen reader
  // users start there, as after a real page load (sign-in focuses its input).
  if (found.r.page !== 'signin') root.querySelector('h1')?.focus({preventScroll: true});
}

function takeFlash() {
  const f = flash;
  flash = '';
  return f;
}

// Only our own routes: a next=... from the URL must not send the user
// anywhere else.
function safeNext(next) {
  return next && /^#\/[^/]/.test(next + 'x') && !next.startsWith('#/signin') ? next : '#/';
}

function markNav(path) {
  for (const a of document.querySelectorAll('#nav a')) {
    const target = a.getAttribute('href').slice(1);
    const on = target === '/' ? path === '/' : path === target || path.startsWith(target + '/');
    if (on) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

function renderHeader() {
  const s = getSession();
  const nav = document.getElementById('nav');
  const account = document.getElementById('account');
  if (!s) {
    nav.replaceChildren();
    account.replaceChildren();
    delete document.body.dataset.role;
    return;
  }
  document.body.dataset.role = s.role;
  // A token limited to some apps (s.apps) has no page that serves every
  // app: the webhooks answer it 403.
  fill(nav, ...NAV().filter(([, , role, scope]) => (!role || may(role)) && !(scope === 'every-app' && s.apps))
    .map(([href, label]) => h('a', {href}, label)));
  fill(account,
    appSwitcher(),
    langSwitcher(),
    h('span', {id: 'whoami', class: 'whoami', title: s.kind === 'person' ? t('app.whoami.person') : t('app.whoami.token')},
      h('span', {class: 'whoami-name'}, s.name), ' ',
      roleTag(s.role)),
    h('button', {type: 'button', id: 'signout', class: 'btn btn-small', on: {click: signOut}}, t('app.signOut')));
}

// The app switcher: only when the token may use more than one app
// (apps.js). Choosing one shows the page again, filtered by it.
function appSwitcher() {
  if (!apps.several()) return null;
  const select = h('select', {id: 'app-switcher', value: apps.current(), on: {change: (ev) => {
    apps.choose(ev.target.value);
    document.body.dataset.app = apps.current();
    route();
  }}}, apps.list().map((a) => h('option', {value: a.name, title: a.project_id}, a.name)));
  return h('span', {class: 'app-switch'}, h('label', {for: 'app-switcher'}, t('app.app')), select);
}

// The language switcher: English or Korean, kept in this browser.
function langSwitcher() {
  const select = h('select', {id: 'lang-switcher', value: i18n.lang(), 'aria-label': i18n.t('lang.label'),
    on: {change: (ev) => i18n.setLang(ev.target.value)}},
  i18n.LANGS.map((l) => h('option', {value: l.code, lang: l.code}, l.name)));
  return h('span', {class: 'lang-switch'}, select);
}

function applySession(s) {
  setSession(s);
  if (!s) apps.clear();
  if (apps.several()) document.body.dataset.app = apps.current();
  else delete document.body.dataset.app;
  renderHeader();
  armExpiry();
}

async function signedIn(s, next) {
  setSession(s);
  await apps.load();
  applySession(s);
  location.hash = safeNext(next);
}

async function signOut(ev) {
  const btn = ev.currentTarget;
  btn.disabled = true;
  try {
    await del('/console/api/session');
  } catch (err) {
    // A 401 means the session had ended anyway: the handler moved on.
    if (err.status !== 401) {
      btn.disabled = false;
      showPageError(document.getElementById('app'), new Error(t('app.signOutFailed', {message: err.message})));
      return;
    }
  }
  endSession('');
}

// Drop the local session and show the sign-in page, remembering where the
// user was so that signing in again returns there.
function endSession(message, keepPlace) {
  const here = parseHash().path === '/signin' ? '' : currentHash();
  applySession(null);
  flash = message;
  const before = location.hash;
  location.hash = keepPlace && here ? '#/signin?next=' + encodeURIComponent(here) : '#/signin';
  // The same hash as before (a 401 on the sign-in page): no hashchange.
  if (location.hash === before) route();
}

// The session ends at expires_at on the server; ask then, and go to
// sign-in if it is gone (an extended session just re-arms the timer).
function armExpiry() {
  clearTimeout(expiryTimer);
  const s = getSession();
  if (!s || !s.expires_at) return;
  const ms = new Date(s.expires_at).getTime() - Date.now();
  // A time already past while the server still says yes is clock skew:
  // ask once a minute rather than in a tight loop.
  if (!Number.isNaN(ms)) checkSessionIn(ms > 0 ? ms + 1000 : 60000);
}

function checkSessionIn(ms) {
  clearTimeout(expiryTimer);
  // setTimeout takes at most 2^31-1 ms (~24 days).
  expiryTimer = setTimeout(async () => {
    try {
      const s = await api('GET', '/console/api/session', undefined, {handle401: false});
      if (s.signed_in) applySession(s);
      else endSession(t('app.sessionExpired'), true);
    } catch (err) {
      if (err.status === 401) endSession(t('app.sessionExpired'), true);
      else checkSessionIn(30000); // the server is unreachable: ask again later
    }
  }, Math.min(Math.max(ms, 1000), 2 ** 31 - 1));
}

onUnauthorized(() => {
  if (!getSession()) return; // already on the way out
  endSession(t('app.sessionEnded'), true);
});

// Boot: a reload has lost the csrf token, the session object gives it back.
async function boot() {
  try {
    await i18n.load();
  } catch {
    // the catalog did not come: t() shows each key's English text or the key
  }
  staticTexts();
  try {
    // signed_in false (a 200, so that a signed-out load logs no error):
    // no session; the router shows the sign-in page.
    const s = await api('GET', '/console/api/session', undefined, {handle401: false});
    if (s.signed_in) {
      setSession(s);
      await apps.load();
    }
    applySession(s.signed_in ? s : null);
  } catch (err) {
    if (err.status !== 401) {
      const root = document.getElementById('app');
      fill(root, h('h1', {tabindex: '-1'}, t('app.console')),
        h('p', null, h('button', {type: 'button', class: 'btn', on: {click: () => location.reload()}}, t('common.tryAgain'))));
      showPageError(root, new Error(t('app.sessionCheckFailed', {message: err.message})));
      return;
    }
  }
  window.addEventListener('hashchange', route);
  route();
}

// The texts index.html holds before the catalog comes (the loading line,
// the confirmation's defaults), in the chosen language.
function staticTexts() {
  document.title = t('app.console');
  document.getElementById('nav')?.setAttribute('aria-label', t('app.navLabel'));
  const loading = document.querySelector('#app .loading');
  if (loading) loading.textContent = t('common.loading');
  const text = (id, s) => {
    const el = document.getElementById(id);
    if (el) el.textContent = s;
  };
  text('confirm-title', t('dom.confirm.title'));
  text('confirm-cancel', t('dom.confirm.back'));
  text('confirm-ok', t('dom.confirm.ok'));
  const brand = document.querySelector('.brand-sub');
  if (brand) brand.textContent = t('app.brandSub');
}

boot();
