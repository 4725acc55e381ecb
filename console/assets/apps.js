// The apps (Firebase projects) the signed-in token may use, and the one
// the console is showing. GET /push/apps lists them; with more than one
// the header shows a switcher, and every page asks for the chosen app's
// broadcasts, totals, audiences and jobs only. The choice is kept in
// localStorage, so a reload or a new tab shows the same app.
//
// With a single app nothing visible changes: there is no switcher, but
// requests still name the one app the token may use (a deployment of
// several apps requires the app, even from a token limited to one).
// Without the list (an older server) current() is '' and no request names
// an app.

import {get} from './api.js';

const KEY = 'pushfan.app';

let apps = []; // [{name, project_id, rate_limit}]
let chosen = '';

// load asks the server which apps this session may use. A failure (an
// older server without the route, a network error) leaves one implied
// app: the console works as before, without a switcher.
export async function load() {
  try {
    const r = await get('/push/apps', {handle401: false});
    apps = Array.isArray(r?.apps) ? r.apps : [];
  } catch {
    apps = [];
  }
  const names = apps.map((a) => a.name);
  let stored = '';
  try {
    stored = localStorage.getItem(KEY) || '';
  } catch {
    // storage disabled: the choice lasts for this page only
  }
  chosen = names.includes(stored) ? stored : names[0] || '';
}

export function clear() {
  apps = [];
  chosen = '';
}

export function list() {
  return apps;
}

// several: whether there is a choice to make (and so to show).
export function several() {
  return apps.length > 1;
}

// current is the chosen app's name, or '' when the server listed none.
export function current() {
  return chosen;
}

export function choose(name) {
  if (!apps.some((a) => a.name === name)) return;
  chosen = name;
  try {
    localStorage.setItem(KEY, name);
  } catch {
    // storage disabled: see load
  }
}

// mine: whether an item of a list (a named audience, a cron job) belongs
// to the chosen app. Items without an app (an older server) are shown.
export function mine(item) {
  const app = current();
  return !app || !item?.app || item.app === app;
}
