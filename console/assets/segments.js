// Segments: the saved ones (#/segments), and one with its filter in words
// and its versions (#/segments/NAME). A sender builds a new one, edits one
// (a new version: the old ones stay, and broadcasts sent to them keep
// theirs), sends to one, and deletes one. The builder is segbuilder.js.

import {get, del, may} from './api.js';
import {h, table, emptyRow, confirmDialog, isQuiet, fill, add, showPageError} from './dom.js';
import {timeEl} from './format.js';
import {describe} from './segfilter.js';
import {countLine} from './segcount.js';
import {t} from './i18n.js';

// The fields of this deployment (GET /push/segments/fields): the words of
// a filter need the fields' kinds. A failure leaves the words plainer.
export async function loadFields(signal) {
  const r = await get('/push/segments/fields', {signal});
  return r.fields || [];
}

export async function render(ctx) {
  const name = ctx.params[0];
  return name ? renderOne(ctx, name) : renderList(ctx);
}

async function renderList(ctx) {
  const {root, signal} = ctx;
  const sender = may('sender');
  add(root, h('div', {class: 'page-head'},
    h('h1', {tabindex: '-1'}, t('nav.segments')),
    sender ? h('a', {href: '#/segments/_new', id: 'segment-new', class: 'btn btn-primary'}, t('app.title.newSegment')) : null));
  add(root, h('p', {class: 'hint'}, t('segments.intro')));
  const list = await get('/push/segments', {signal});
  const segs = list.segments || [];
  add(root, h('div', {class: 'card'}, table({id: 'segments-table'}, [t('segments.col.name'), t('segments.col.version'), t('segments.col.description'), t('segments.col.updated')],
    segs.length ? segs.map((s) => h('tr', {'data-segment': s.name},
      h('td', null, h('a', {href: `#/segments/${encodeURIComponent(s.name)}`}, s.name)),
      h('td', {class: 'num'}, t('segments.v', {n: s.version})),
      h('td', {class: 'wrap', 'data-raw': ''}, s.description || h('span', {class: 'muted'}, '—')),
      h('td', null, timeEl(s.updated_at))))
      : emptyRow(4, sender ? t('segments.noneSender') : t('segments.none')))));
}

async function renderOne(ctx, name) {
  const {root, signal} = ctx;
  const sender = may('sender');
  const path = `/push/segments/${encodeURIComponent(name)}`;
  const [seg, fieldsRes] = await Promise.all([get(path, {signal}), loadFields(signal).catch(() => [])]);
  const fields = fieldsRes;
  document.title = `${t('segments.titleOf', {name: seg.name})} · pushfan`;

  const head = h('div', {class: 'page-head'}, h('h1', {tabindex: '-1'}, t('segments.heading'), ' ', h('code', null, seg.name)));
  if (sender) {
    add(head, h('div', {class: 'actions'},
      h('a', {href: `#/compose?segment=${encodeURIComponent(seg.name)}`, id: 'segment-send', class: 'btn btn-primary'}, t('segments.send')),
      h('a', {href: `#/segments/${encodeURIComponent(seg.name)}/edit`, id: 'segment-edit', class: 'btn'}, t('segments.edit')),
      h('button', {type: 'button', id: 'segment-delete', class: 'btn btn-danger', on: {click: onDelete}}, t('common.delete'))));
  }
  add(root, h('p', null, h('a', {href: '#/segments'}, t('segments.all'))), head);

  const count = h('p', {id: 'segment-count', class: 'count-out', 'aria-live': 'polite'});
  add(root, h('section', {class: 'card', 'aria-labelledby': 'seg-now-h'},
    h('h2', {id: 'seg-now-h'}, t('segments.now', {n: seg.version})),
    seg.description ? h('p', {id: 'segment-description', 'data-raw': ''}, seg.description) : null,
    h('div', {id: 'segment-filter'}, describe(h, seg.filter, fields)),
    sender ? count : null));

  const shown = h('div', {id: 'segment-version-shown', 'aria-live': 'polite'});
  const rows = (seg.versions || []).slice().sort((a, b) => b.version - a.version).map((v) => h('tr', {'data-version': v.version},
    h('td', {class: 'num'}, t('segments.v', {n: v.version}), v.version === seg.version ? h('span', {class: 'tag tag-on'}, t('segments.current')) : null),
    h('td', null, timeEl(v.created_at)),
    h('td', null, v.created_by || h('span', {class: 'muted'}, '—')),
    h('td', {class: 'wrap', 'data-raw': ''}, v.description || h('span', {class: 'muted'}, '—')),
    h('td', null, h('button', {type: 'button', class: 'btn btn-small', 'aria-label': t('segments.showVersion', {n: v.version}),
      on: {click: () => showVersion(v.version)}}, t('segments.show')))));
  add(root, h('section', {class: 'card', 'aria-labelledby': 'seg-versions-h'},
    h('h2', {id: 'seg-versions-h'}, t('segments.versions')),
    h('p', {class: 'hint'}, t('segments.versionsHint')),
    table({id: 'segment-versions'}, [t('segments.col.version'), t('segments.col.saved'), t('segments.col.by'), t('segments.col.description'), ''],
      rows.length ? rows : emptyRow(5, t('segments.noVersions'))),
    shown));

  async function showVersion(n) {
    fill(shown, h('p', {class: 'muted'}, t('segments.loadingVersion', {n})));
    try {
      const v = await get(`${path}/versions/${n}`, {signal});
      fill(shown, h('h3', null, t('segments.version', {n: v.version})), v.description ? h('p', {'data-raw': ''}, v.description) : null,
        h('div', {'data-version-filter': v.version}, describe(h, v.filter, fields)));
    } catch (err) {
      if (isQuiet(err)) return;
      fill(shown, h('p', {class: 'error-text'}, t('segments.versionFailed', {n, message: err.message})));
    }
  }

  async function onDelete(ev) {
    const ok = await confirmDialog({title: t('segments.deleteTitle', {name: seg.name}), ok: t('common.delete'),
      body: t('segments.deleteBody')});
    if (!ok) return;
    const btn = ev.target;
    btn.disabled = true;
    try {
      await del(path, {signal});
      location.hash = '#/segments';
    } catch (err) {
      btn.disabled = false;
      if (!isQuiet(err)) showPageError(root, new Error(t('segments.deleteFailed', {message: err.message})));
    }
  }

  // The count of who it is now, for a sender (a preview is a POST).
  if (sender) countLine(count, seg.filter, signal);
}
