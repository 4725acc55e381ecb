// Compose a broadcast (senders only), or duplicate one (#/compose?from=ID).
//
// The form maps one to one onto the body of POST /push/broadcast; while
// the user types, the audience is counted (debounced, stale requests
// aborted) and the notification is drawn on a phone. A test send goes to
// a few user ids with the same message fields. With several apps, all of
// it is in the app the header has chosen: the broadcast, the test send and
// the preview name it, and only its named audiences are offered.
//
// With message categories configured (GET /push/categories), a picker
// names the broadcast's category: the preview counts the devices left out
// for want of consent to it and says who its night window holds back,
// and the phone shows the category's labels as they are sent.
//
// A saved segment (segments.js) is an audience too: #/compose?segment=NAME
// (the segment page's "Send to this segment") opens the form on it.
//
// Send opens a review (compose_review.js) of who gets it, when, and how it
// looks, with the warnings the message earns (compose_checks.js); a large
// audience is confirmed by typing. A hold or a dry run goes without one:
// nothing reaches a phone then. What the operator types is kept as a draft
// (compose_drafts.js) until it is sent; templates (compose_templates.js)
// are messages the team saved on the server.

import {get, post, may} from './api.js';
import {h, field, table, emptyRow, showPageError, isQuiet, fill, add} from './dom.js';
import {num, parseIds, parseParam, paramHint, localInputToRFC3339, isoToLocalInput, localValue} from './format.js';
import {createFieldErrors, inputTarget, splitPath} from './fielderrors.js';
import {createPhone} from './phone.js';
import {t, tOr, locale} from './i18n.js';
import {warnings, apiWords, withDetails, BODY_SHOWN} from './compose_checks.js';
import {openReview, whenLines} from './compose_review.js';
import {loadDraft, saveDraft, clearDraft} from './compose_drafts.js';
import {createTemplates} from './compose_templates.js';
import * as apps from './apps.js';

// The overrides' labels are the catalog's compose.override.<key>.
const PLATFORMS = [
  ['android', '{"priority": "high", "ttl": "3600s"}'],
  ['apns', '{"headers": {"apns-priority": "10"}}'],
  ['webpush', '{"headers": {"Urgency": "high"}}'],
  ['fcm_options', '{"analytics_label": "winter-sale"}'],
];
const DEBOUNCE = 300;

export async function render(ctx) {
  const {root, signal, query} = ctx;
  const fromId = query.get('from');
  add(root, h('h1', {tabindex: '-1'}, fromId ? t('compose.titleDuplicate', {id: fromId}) : t('compose.title')));

  if (!may('sender')) {
    // No form at all for a viewer: nothing on this page could be used.
    add(root, h('p', {class: 'alert alert-info', id: 'compose-denied'},
      t('compose.denied')));
    return;
  }

  // The named audiences and the broadcast to duplicate, together. The form
  // works without either, so a failure is shown and the form still built.
  const [audRes, origRes, catRes, segRes, tplRes] = await Promise.allSettled([
    get('/push/audiences', {signal}),
    fromId ? get(`/push/broadcasts/${encodeURIComponent(fromId)}`, {signal}) : Promise.resolve(null),
    get('/push/categories', {signal}),
    get('/push/segments', {signal}),
    get('/push/templates', {signal}),
  ]);
  if (signal.aborted) return;
  const named = audRes.status === 'fulfilled' ? (audRes.value.named || []).filter(apps.mine) : [];
  // No categories (none configured, or the list failed): no picker, and
  // the server takes a broadcast without one as it always did.
  const categories = catRes.status === 'fulfilled'
    ? {list: catRes.value.categories || [], def: catRes.value.default_category || ''}
    : {list: [], def: ''};
  const segments = segRes.status === 'fulfilled' ? segRes.value.segments || [] : [];

  const app = apps.current();
  if (apps.several()) {
    const a = apps.list().find((x) => x.name === app);
    add(root, h('p', {id: 'compose-app', class: 'alert alert-info', 'data-app': app},
      a?.project_id ? t('compose.app.inProject', {app, project: a.project_id}) : t('compose.app.in', {app}),
      ' ', t('compose.app.switch')));
  }
  // No templates (the list failed): none offered, and links are not
  // checked against the public host.
  const tpl = tplRes.status === 'fulfilled' ? tplRes.value : {templates: [], public_url: null};
  const form = buildForm(ctx, named, categories, segments, tpl);
  add(root, form.el);
  if (audRes.status === 'rejected') showPageError(root, new Error(t('compose.load.audiences', {error: audRes.reason.message})));
  if (segRes.status === 'rejected') showPageError(root, new Error(t('compose.load.segments', {error: segRes.reason.message})));
  if (catRes.status === 'rejected') showPageError(root, new Error(t('compose.load.categories', {error: catRes.reason.message})));
  if (origRes.status === 'rejected') {
    showPageError(root, new Error(t('compose.load.original', {id: fromId, error: origRes.reason.message})));
  } else if (origRes.value) {
    form.prefill(origRes.value);
  } else if (query.get('segment')) {
    if (!form.chooseSegment(query.get('segment'))) showPageError(root, new Error(t('compose.load.noSegment', {name: query.get('segment')})));
  } else {
    form.restoreDraft();
  }
  form.refresh();
}

function buildForm(ctx, namedAudiences, categories, segments, tpl) {
  const {signal} = ctx;
  const timers = new Set();
  ctx.cleanup(() => timers.forEach(clearTimeout));
  const later = (fn, ms) => {
    const id = setTimeout(() => {
      timers.delete(id);
      fn();
    }, ms);
    timers.add(id);
    return id;
  };
  const cancel = (id) => {
    clearTimeout(id);
    timers.delete(id);
  };
  let rowSeq = 0;

  // ---- Message ---------------------------------------------------------
  const title = h('input', {id: 'f-title', type: 'text', autocomplete: 'off'});
  const body = h('textarea', {id: 'f-body', rows: 3});
  const image = h('input', {id: 'f-image', type: 'url', autocomplete: 'off', placeholder: 'https://…/picture.png', inputmode: 'url'});

  // The category picker, only when categories are configured. Without a
  // default it starts on no choice: the operator must pick one (the API
  // refuses a broadcast without, and says so next to the picker).
  const hasCategories = categories.list.length > 0;
  const category = h('select', {id: 'f-category'},
    categories.def ? null : h('option', {value: ''}, t('compose.category.choose')),
    categories.list.map((c) => h('option', {value: c.name}, c.name)));
  category.value = categories.def;
  const categoryRules = h('ul', {id: 'f-category-rules', class: 'hint plain'});
  const categoryField = hasCategories
    ? h('div', {class: 'block', id: 'f-category-block'},
      field(t('compose.category.label'), category, t('compose.category.hint')),
      categoryRules)
    : null;
  const categoryOf = (name) => categories.list.find((c) => c.name === name) || null;
  const chosenCategory = () => (hasCategories ? categoryOf(category.value) : null);
  // A named audience declared in a category sends in it (the API refuses
  // another): the picker shows it and is locked while it is chosen, and
  // gives back the operator's own choice after.
  let ownChoice = category.value;
  function syncCategory() {
    if (!hasCategories) return;
    const own = kindOf() === 'named' ? namedAudiences.find((a) => a.name === audName.value)?.category || '' : '';
    if (own === (category.disabled ? category.value : '')) return;
    if (!category.disabled) ownChoice = category.value;
    category.disabled = Boolean(own);
    category.value = own || ownChoice;
    showCategoryRules();
    updatePhone();
  }

  const dataRows = [];
  const dataList = h('div', {id: 'f-data', class: 'rows', role: 'group', tabindex: '-1', 'aria-labelledby': 'f-data-label'});
  const dataWrap = h('div', {class: 'block'},
    h('p', {class: 'block-label', id: 'f-data-label'}, t('compose.data.label')),
    dataList,
    h('button', {type: 'button', id: 'add-data', class: 'btn btn-small', on: {click: () => {
      const r = addDataRow();
      r.key.focus();
      errs.clearFor(dataList);
    }}}, t('compose.data.add')));

  function addDataRow(k = '', v = '') {
    const n = ++rowSeq;
    const key = h('input', {id: `data-key-${n}`, class: 'data-key', type: 'text', value: k, autocomplete: 'off', spellcheck: 'false'});
    const val = h('input', {id: `data-value-${n}`, class: 'data-value', type: 'text', value: v, autocomplete: 'off'});
    const row = {key, val};
    row.el = h('div', {class: 'row data-row'},
      h('div', {class: 'field'}, h('label', {for: key.id}, t('compose.data.key')), key),
      h('div', {class: 'field'}, h('label', {for: val.id}, t('compose.data.value')), val),
      h('button', {type: 'button', class: 'btn btn-small btn-quiet', 'aria-label': t('compose.data.remove', {n}), on: {click: () => {
        dataRows.splice(dataRows.indexOf(row), 1);
        row.el.remove();
        errs.clearFor(dataList);
        document.getElementById('add-data').focus();
      }}}, t('compose.remove')));
    dataRows.push(row);
    add(dataList, row.el);
    return row;
  }

  const locRows = [];
  const locList = h('div', {id: 'f-localized', class: 'rows', role: 'group', tabindex: '-1', 'aria-labelledby': 'f-localized-label'});
  const locWrap = h('div', {class: 'block'},
    h('p', {class: 'block-label', id: 'f-localized-label'}, t('compose.loc.label')),
    locList,
    h('button', {type: 'button', id: 'add-localized', class: 'btn btn-small', on: {click: () => {
      const r = addLocRow();
      r.locale.focus();
      errs.clearFor(locList);
    }}}, t('compose.loc.add')));

  function addLocRow(locale = '', lTitle = '', b = '') {
    const n = ++rowSeq;
    const loc = h('input', {id: `loc-locale-${n}`, class: 'loc-locale', type: 'text', value: locale, placeholder: 'ko', autocomplete: 'off', spellcheck: 'false'});
    const lt = h('input', {id: `loc-title-${n}`, class: 'loc-title', type: 'text', value: lTitle, autocomplete: 'off'});
    const lb = h('input', {id: `loc-body-${n}`, class: 'loc-body', type: 'text', value: b, autocomplete: 'off'});
    const row = {locale: loc, title: lt, body: lb};
    row.el = h('div', {class: 'row loc-row'},
      h('div', {class: 'field field-narrow'}, h('label', {for: loc.id}, t('compose.loc.locale')), loc),
      h('div', {class: 'field'}, h('label', {for: lt.id}, t('compose.msg.title')), lt),
      h('div', {class: 'field'}, h('label', {for: lb.id}, t('compose.msg.body')), lb),
      h('button', {type: 'button', class: 'btn btn-small btn-quiet', 'aria-label': t('compose.loc.remove', {n}), on: {click: () => {
        locRows.splice(locRows.indexOf(row), 1);
        row.el.remove();
        errs.clearFor(locList);
        syncLocales();
        updatePhone();
        document.getElementById('add-localized').focus();
      }}}, t('compose.remove')));
    locRows.push(row);
    add(locList, row.el);
    return row;
  }

  const platform = {};
  const platformFields = PLATFORMS.map(([key, example]) => {
    const ta = h('textarea', {id: `f-${key}`, rows: 3, class: 'mono', spellcheck: 'false', placeholder: example});
    platform[key] = ta;
    let timer = 0;
    // Syntax errors show while typing (debounced), before any send.
    ta.addEventListener('input', () => {
      cancel(timer);
      timer = later(() => {
        const r = parseJSONObject(ta.value);
        if (r.error) errs.show(key, r.error);
      }, DEBOUNCE);
    });
    const labels = {android: t('compose.override.android'), apns: t('compose.override.apns'),
      webpush: t('compose.override.webpush'), fcm_options: t('compose.override.fcm_options')};
    return field(labels[key], ta);
  });

  // ---- Audience -------------------------------------------------------
  const radio = (name, value, label, checked) => {
    const input = h('input', {type: 'radio', name, value, id: `${name}-${value}`, checked});
    return h('span', {class: 'choice'}, input, h('label', {for: input.id}, label));
  };
  const kindRow = h('div', {class: 'choices', role: 'radiogroup', tabindex: '-1', 'aria-label': t('compose.aud.kind')},
    radio('audience-kind', 'all', t('compose.aud.all'), true),
    radio('audience-kind', 'user_ids', t('compose.aud.userIds')),
    radio('audience-kind', 'segment', t('compose.aud.segment')),
    radio('audience-kind', 'named', t('compose.aud.named')));
  if (!namedAudiences.length) {
    const r = kindRow.querySelector('input[value="named"]');
    r.disabled = true;
    r.nextSibling.textContent = t('compose.aud.namedNone');
  }
  if (!segments.length) {
    const r = kindRow.querySelector('input[value="segment"]');
    r.disabled = true;
    r.nextSibling.textContent = t('compose.aud.segmentNone');
  }
  const segName = h('select', {id: 'f-segment'},
    h('option', {value: ''}, t('compose.choose')),
    segments.map((sg) => h('option', {value: sg.name}, sg.name)));
  const segDesc = h('p', {class: 'hint', id: 'f-segment-desc'});
  function describeSegment() {
    const sg = segments.find((x) => x.name === segName.value);
    fill(segDesc, sg ? [(sg.description ? t('compose.seg.versionDesc', {version: sg.version, description: sg.description}) : t('compose.seg.version', {version: sg.version})) + ' ',
      h('a', {href: `#/segments/${encodeURIComponent(sg.name)}`}, t('compose.seg.see'))] : null);
  }
  const userIds = h('textarea', {id: 'f-user_ids', rows: 2, class: 'mono', spellcheck: 'false', placeholder: '101, 102, 103'});
  const audName = h('select', {id: 'f-audience-name'},
    h('option', {value: ''}, t('compose.choose')),
    namedAudiences.map((a) => h('option', {value: a.name}, a.name)));
  const audDesc = h('p', {class: 'hint', id: 'f-audience-desc'});
  const params = h('div', {id: 'f-params', class: 'params', tabindex: '-1'});
  const kindOf = () => kindRow.querySelector('input[name="audience-kind"]:checked')?.value || 'all';
  const setKind = (k) => {
    const r = kindRow.querySelector(`input[value="${k}"]`);
    if (r && !r.disabled) r.checked = true;
    markKind();
  };
  const markKind = () => {
    for (const el of audienceBox.querySelectorAll('[data-kind]')) el.classList.toggle('inactive', el.dataset.kind !== kindOf());
    syncCategory();
  };

  function renderParams(values = {}) {
    const a = namedAudiences.find((x) => x.name === audName.value);
    audDesc.textContent = a?.description || '';
    params.replaceChildren();
    for (const [pname, type] of Object.entries(a?.params || {})) {
      const input = h('input', {
        id: 'f-param-' + pname.replace(/[^A-Za-z0-9_-]/g, '_'), type: 'text', 'data-param': pname, 'data-type': type,
        autocomplete: 'off', spellcheck: 'false', value: paramText(values[pname]),
      });
      add(params, field(pname, input, paramHint(type)));
    }
  }

  const previewCount = h('strong', {id: 'preview-count'}, '…');
  const previewUsers = h('strong', {id: 'preview-users'}, '…');
  const previewSample = h('span', {id: 'preview-sample', class: 'mono'}, '—');
  const previewError = h('p', {id: 'preview-error', class: 'error-text', hidden: true});
  // The frequency cap the broadcast would take (the audience's named cap,
  // the default, or why none applies), and the users it would withhold now
  // (null: no cap applies).
  const previewCap = h('p', {id: 'preview-cap', class: 'muted', hidden: true});
  const previewCapped = h('p', {id: 'preview-capped', class: 'muted', hidden: true});
  // Consent: the devices the category leaves out (data-excluded), and who
  // its night window holds back until it ends.
  const previewConsent = h('p', {id: 'preview-consent', class: 'muted', hidden: true});
  const previewNight = h('p', {id: 'preview-night', class: 'muted', hidden: true});
  const kindErrors = h('div', {class: 'kind-errors'});
  const audienceBox = h('fieldset', {class: 'card', id: 'f-audience'},
    h('legend', null, t('compose.aud.legend')),
    kindRow,
    kindErrors,
    h('div', {'data-kind': 'user_ids', class: 'kind-block'},
      field(t('compose.aud.userIds'), userIds, t('compose.aud.userIdsHint'))),
    h('div', {'data-kind': 'segment', class: 'kind-block'},
      field(t('compose.aud.segment'), segName, t('compose.aud.segmentHint')), segDesc),
    h('div', {'data-kind': 'named', class: 'kind-block'},
      field(t('compose.aud.named'), audName), audDesc, params),
    h('div', {class: 'preview-box', 'aria-live': 'polite'},
      h('p', null, t('compose.preview.devices'), ' ', previewCount),
      h('p', null, t('compose.preview.users'), ' ', previewUsers),
      h('p', null, t('compose.preview.sample'), ' ', previewSample),
      previewCap,
      previewCapped,
      previewConsent,
      previewNight,
      previewError));

  // ---- Delivery -------------------------------------------------------
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || t('compose.when.yourZone');
  const deliveryRow = h('div', {class: 'choices', role: 'radiogroup', 'aria-label': t('compose.when.label')},
    radio('delivery', 'now', t('compose.when.sendNow'), true),
    radio('delivery', 'at', t('compose.when.atTime')),
    radio('delivery', 'local', t('compose.when.atLocal')));
  const sendAt = h('input', {id: 'f-send_at', type: 'datetime-local'});
  const sendAtLocal = h('input', {id: 'f-send_at_local', type: 'datetime-local'});
  const quietStart = h('input', {id: 'f-quiet-start', type: 'time'});
  const quietEnd = h('input', {id: 'f-quiet-end', type: 'time'});
  const quietBox = h('div', {class: 'block', id: 'f-quiet', tabindex: '-1'},
    h('p', {class: 'block-label'}, t('compose.quiet.label')),
    h('div', {class: 'row'}, field(t('compose.quiet.from'), quietStart), field(t('compose.quiet.to'), quietEnd)));
  const maxRate = h('input', {id: 'f-max_rate', type: 'number', min: '0', step: 'any', inputmode: 'decimal'});
  const deliverOver = h('input', {id: 'f-deliver_over', type: 'text', placeholder: '30m', autocomplete: 'off', spellcheck: 'false'});
  const klass = h('select', {id: 'f-class'},
    h('option', {value: ''}, t('compose.class.default')),
    h('option', {value: 'transactional'}, t('compose.class.transactional')),
    h('option', {value: 'bulk'}, t('compose.class.bulk')));
  const hold = h('input', {id: 'f-hold', type: 'checkbox'});
  const dryRun = h('input', {id: 'f-dry_run', type: 'checkbox'});
  // "frequency_cap": false: an alert that must reach users the cap holds.
  const pastCap = h('input', {id: 'f-frequency_cap', type: 'checkbox'});
  const deliveryOf = () => deliveryRow.querySelector('input:checked')?.value || 'now';
  const setDelivery = (v) => {
    deliveryRow.querySelector(`input[value="${v}"]`).checked = true;
    markDelivery();
    updateLabel();
  };
  const markDelivery = () => {
    for (const el of deliveryBox.querySelectorAll('[data-delivery]')) el.classList.toggle('inactive', el.dataset.delivery !== deliveryOf());
  };
  const check = (input, label, hint) => h('div', {class: 'field field-check'}, input, h('label', {for: input.id}, label),
    hint ? h('span', {class: 'hint'}, hint) : null);
  const deliveryBox = h('fieldset', {class: 'card'},
    h('legend', null, t('compose.when.legend')),
    deliveryRow,
    h('div', {class: 'row'},
      h('div', {'data-delivery': 'at', class: 'kind-block'}, field(t('compose.when.sendAt', {zone}), sendAt)),
      h('div', {'data-delivery': 'local', class: 'kind-block'},
        field(t('compose.when.localTime'), sendAtLocal, t('compose.when.localHint')))),
    quietBox,
    h('div', {class: 'row'},
      field(t('compose.pace.rate'), maxRate),
      field(t('compose.pace.over'), deliverOver, t('compose.pace.overHint')),
      field(t('compose.class.label'), klass)),
    check(hold, t('compose.hold'), t('compose.holdHint')),
    check(dryRun, t('compose.dryRun'), t('compose.dryRunHint')),
    check(pastCap, t('compose.pastCap'), t('compose.pastCapHint')));

  // ---- Templates, warnings, drafts ------------------------------------
  const templates = createTemplates({
    list: tpl.templates || [],
    read: () => ({title: title.value, body: body.value, data: dataOf(), link: checkedMessage().webpush?.fcm_options?.link}),
    use: (m) => {
      title.value = m.title || '';
      body.value = m.body || '';
      for (const r of [...dataRows]) r.el.remove();
      dataRows.length = 0;
      for (const [k, v] of Object.entries(m.data || {})) addDataRow(k, v);
      // The link goes where the web push shows it, unless overrides are typed.
      if (m.link && !platform.webpush.value.trim()) platform.webpush.value = JSON.stringify({fcm_options: {link: m.link}}, null, 2);
      updatePhone();
      checkMessage();
      keepDraft();
    },
  });
  const templateBar = templates.el;
  const bodyCount = h('span', {id: 'f-body-count', class: 'hint'});
  const formWarnings = h('div', {id: 'form-warnings', class: 'alert alert-warn', role: 'status', hidden: true});
  const publicURL = tpl.public_url || '';

  function dataOf() {
    const d = {};
    for (const r of dataRows) if (r.key.value.trim()) d[r.key.value.trim()] = r.val.value;
    return d;
  }

  // The message as the checks read it: what was typed, parsed where it can be.
  function checkedMessage() {
    const web = parseJSONObject(platform.webpush.value);
    return {title: title.value, body: body.value, data: dataOf(), webpush: web.value};
  }

  // The warnings under the form: shown as the operator types, never blocking.
  function checkMessage() {
    const len = [...body.value].length;
    bodyCount.textContent = t('compose.msg.bodyCount', {count: len, max: BODY_SHOWN});
    bodyCount.classList.toggle('warn-text', len > BODY_SHOWN);
    const ws = warnings(checkedMessage(), publicURL);
    formWarnings.hidden = !ws.length;
    fill(formWarnings, ws.length ? h('ul', {class: 'plain'}, ws.map((w) => h('li', {'data-warning': w.id}, w.text))) : null);
    return ws;
  }

  // snapshot is the form as a draft keeps it; restore puts one back.
  function snapshot() {
    return {
      title: title.value, body: body.value, image: image.value,
      data: dataRows.map((r) => [r.key.value, r.val.value]),
      localized: locRows.map((r) => [r.locale.value, r.title.value, r.body.value]),
      platform: Object.fromEntries(PLATFORMS.map(([key]) => [key, platform[key].value])),
      kind: kindOf(), user_ids: userIds.value, segment: segName.value, audience: audName.value,
      category: hasCategories && !category.disabled ? category.value : '',
    };
  }
  function isEmpty(d) {
    return !d.title && !d.body && !d.image && !d.data.some(([k, v]) => k || v) && !d.localized.some((r) => r.some(Boolean)) &&
      !Object.values(d.platform).some(Boolean) && !d.user_ids;
  }
  let draftTimer = 0;
  function keepDraft() {
    cancel(draftTimer);
    draftTimer = later(() => {
      const d = snapshot();
      saveDraft(apps.current(), d, isEmpty(d));
    }, DEBOUNCE);
  }
  const draftLine = h('p', {id: 'draft-restored', class: 'notice', role: 'status', hidden: true});
  function restoreDraft() {
    const d = loadDraft(apps.current());
    if (!d || isEmpty({data: [], localized: [], platform: {}, ...d})) return;
    title.value = d.title || '';
    body.value = d.body || '';
    image.value = d.image || '';
    imageShown = image.value;
    for (const [k, v] of d.data || []) addDataRow(k, v);
    for (const [l, lt, lb] of d.localized || []) addLocRow(l, lt, lb);
    for (const [key] of PLATFORMS) platform[key].value = d.platform?.[key] || '';
    userIds.value = d.user_ids || '';
    if (d.kind === 'segment' && d.segment) chooseSegment(d.segment);
    else if (d.kind === 'named' && d.audience) {
      audName.value = d.audience;
      if (audName.value === d.audience) {
        renderParams();
        setKind('named');
      }
    } else if (d.kind) setKind(d.kind);
    if (d.category && hasCategories && !category.disabled) category.value = d.category;
    const discard = h('button', {type: 'button', id: 'draft-discard', class: 'btn btn-small btn-quiet', on: {click: () => {
      clearDraft(apps.current());
      location.reload();
    }}}, t('compose.draft.discard'));
    fill(draftLine, t('compose.draft.restored', {when: new Date(d.saved_at || Date.now()).toLocaleString(locale())}), ' · ', discard);
    draftLine.hidden = false;
  }

  // Server errors in the operator's words, next to the field they name.
  function showApi(err) {
    const words = apiWords(err);
    if (err.field && resolve(err.field)) errs.show(err.field, words);
    else errs.formMessage(words);
  }
  function errWords(err) {
    return apiWords(err);
  }

  // ---- Buttons, errors, side column -----------------------------------
  const send = h('button', {id: 'btn-send', type: 'submit', class: 'btn btn-primary'}, t('compose.btn.send'));
  const formError = h('div', {id: 'form-error', class: 'alert', role: 'alert', tabindex: '-1', hidden: true});
  const notice = h('div', {class: 'notice', role: 'status', hidden: true});

  const mainForm = h('form', {id: 'compose-form', class: 'compose-form', novalidate: true, on: {submit: onSend}},
    draftLine,
    notice,
    formError,
    h('fieldset', {class: 'card'},
      h('legend', null, t('compose.msg.legend')),
      templateBar,
      categoryField,
      field(t('compose.msg.title'), title),
      field(t('compose.msg.body'), body, bodyCount),
      field(t('compose.msg.image'), image, t('compose.msg.imageHint')),
      dataWrap,
      locWrap),
    audienceBox,
    h('fieldset', {class: 'card'},
      h('legend', null, t('compose.override.legend')),
      h('p', {class: 'hint'}, t('compose.override.hint')),
      h('div', {class: 'grid-2'}, platformFields)),
    deliveryBox,
    formWarnings,
    h('div', {class: 'actions sticky-actions'}, send));

  const phone = createPhone('phone-preview');
  const phoneLocale = h('select', {id: 'phone-locale'}, h('option', {value: ''}, t('compose.phone.default')));
  const testIds = h('input', {id: 'f-test-user_ids', type: 'text', inputmode: 'numeric', autocomplete: 'off', placeholder: '101, 102'});
  const testSend = h('button', {id: 'btn-test-send', type: 'submit', class: 'btn'}, t('compose.test.send'));
  const testOut = h('div', {class: 'test-out', 'aria-live': 'polite'});
  const testForm = h('form', {id: 'test-form', class: 'card', novalidate: true, on: {submit: onTest}},
    h('h2', null, t('compose.test.title')),
    h('p', {class: 'hint'}, t('compose.test.hint')),
    h('div', {class: 'row row-end'}, field(t('compose.aud.userIds'), testIds), h('div', {class: 'field'}, testSend)),
    testOut);

  const el = h('div', {class: 'compose-grid'},
    mainForm,
    h('aside', {class: 'compose-side'},
      h('section', {class: 'card', 'aria-labelledby': 'phone-h'},
        h('h2', {id: 'phone-h'}, t('compose.phone.title')),
        field(t('compose.phone.variant'), phoneLocale),
        phone.el),
      testForm));

  const errs = createFieldErrors(el, formError, resolve);

  // Where an API field path points, nearest first. Nested paths fall back
  // to the block that holds them: apns.headers.x → the apns textarea.
  function resolve(path) {
    const parts = splitPath(path);
    const head = parts[0];
    const rest = String(path).slice(head.length + 1);
    const block = (container, input) => ({container, input, scope: container});
    switch (head) {
      case 'title': return inputTarget(title);
      case 'body': return inputTarget(body);
      case 'image': return inputTarget(image);
      case 'data': {
        const row = rest && dataRows.find((r) => r.key.value.trim() === rest);
        return block(dataWrap, row ? row.key : dataList);
      }
      case 'localized': {
        const m = rest.match(/^(.*?)(?:\.(title|body))?$/);
        const row = m && m[1] && locRows.find((r) => r.locale.value.trim() === m[1]);
        if (!row) return block(locWrap, locList);
        return {container: row.el, input: m[2] ? row[m[2]] : row.locale, scope: row.el};
      }
      case 'android': case 'apns': case 'webpush': case 'fcm_options':
        return inputTarget(platform[head]);
      case 'audience':
        if (parts[1] === 'user_ids') return inputTarget(userIds);
        if (parts[1] === 'name') return inputTarget(audName);
        if (parts[1] === 'segment') return inputTarget(segName);
        if (parts[1] === 'params') {
          const p = parts[2] && [...params.querySelectorAll('input[data-param]')].find((i) => i.dataset.param === parts[2]);
          return p ? inputTarget(p) : block(params, params);
        }
        return {container: kindErrors, input: kindRow, scope: audienceBox};
      case 'send_at': return inputTarget(sendAt);
      case 'send_at_local': return inputTarget(sendAtLocal);
      case 'quiet_hours':
        if (parts[1] === 'start') return inputTarget(quietStart);
        if (parts[1] === 'end') return inputTarget(quietEnd);
        return block(quietBox, quietBox);
      case 'max_rate': return inputTarget(maxRate);
      case 'deliver_over': return inputTarget(deliverOver);
      case 'class': return inputTarget(klass);
      case 'category': return hasCategories ? inputTarget(category) : null;
      case 'hold': return inputTarget(hold);
      case 'dry_run': case 'invalidate_on_dry_run': return inputTarget(dryRun);
      case 'frequency_cap': return inputTarget(pastCap);
      // Only the test send has these.
      case 'user_ids': case 'tokens': return inputTarget(testIds);
      case 'locale': return inputTarget(phoneLocale);
      default: return null;
    }
  }

  // ---- Reading the form ----------------------------------------------
  function message(errors) {
    const m = {};
    if (title.value) m.title = title.value;
    if (body.value) m.body = body.value;
    if (image.value.trim()) m.image = image.value.trim();

    const data = {};
    let anyData = false;
    for (const r of dataRows) {
      const k = r.key.value.trim();
      if (!k && !r.val.value) continue;
      if (!k) errors.push(['data', t('compose.data.needsKey')]);
      else if (Object.hasOwn(data, k)) errors.push([`data.${k}`, t('compose.data.twice', {key: k})]);
      else {
        data[k] = r.val.value;
        anyData = true;
      }
    }
    if (anyData) m.data = data;

    const loc = {};
    let anyLoc = false;
    for (const r of locRows) {
      const l = r.locale.value.trim();
      if (!l && !r.title.value && !r.body.value) continue;
      if (!l) {
        errors.push(['localized', t('compose.loc.needsLocale')]);
        continue;
      }
      if (Object.hasOwn(loc, l)) {
        errors.push([`localized.${l}`, t('compose.loc.twice', {locale: l})]);
        continue;
      }
      loc[l] = {};
      if (r.title.value) loc[l].title = r.title.value;
      if (r.body.value) loc[l].body = r.body.value;
      anyLoc = true;
    }
    if (anyLoc) m.localized = loc;

    for (const [key] of PLATFORMS) {
      const r = parseJSONObject(platform[key].value);
      if (r.error) errors.push([key, r.error]);
      else if (r.value !== undefined) m[key] = r.value;
    }
    return m;
  }

  function audience(errors) {
    const kind = kindOf();
    if (kind === 'all') return {all: true};
    if (kind === 'segment') {
      if (segName.value) return {segment: segName.value};
      errors.push(['audience.segment', t('compose.aud.chooseSegment')]);
      return null;
    }
    if (kind === 'user_ids') {
      try {
        const ids = parseIds(userIds.value);
        if (ids.length) return {user_ids: ids};
        errors.push(['audience.user_ids', t('compose.aud.enterIds')]);
      } catch (e) {
        errors.push(['audience.user_ids', e.message]);
      }
      return null;
    }
    if (!audName.value) {
      errors.push(['audience.name', t('compose.aud.chooseNamed')]);
      return null;
    }
    const p = {};
    for (const input of params.querySelectorAll('input[data-param]')) {
      // An empty input is left out: the server names a required one.
      if (input.value.trim() === '') continue;
      try {
        p[input.dataset.param] = parseParam(input.dataset.type, input.value);
      } catch (e) {
        errors.push([`audience.params.${input.dataset.param}`, e.message]);
      }
    }
    return Object.keys(p).length ? {name: audName.value, params: p} : {name: audName.value};
  }

  function delivery(errors) {
    const d = {};
    const kind = deliveryOf();
    if (kind === 'at') {
      if (!sendAt.value) errors.push(['send_at', t('compose.when.chooseAt')]);
      else d.send_at = localInputToRFC3339(sendAt.value);
    } else if (kind === 'local') {
      if (!sendAtLocal.value) errors.push(['send_at_local', t('compose.when.chooseLocal')]);
      else d.send_at_local = sendAtLocal.value.length === 16 ? sendAtLocal.value + ':00' : sendAtLocal.value;
    }
    if (quietStart.value && quietEnd.value) d.quiet_hours = {start: quietStart.value, end: quietEnd.value};
    else if (quietStart.value) errors.push(['quiet_hours.end', t('compose.quiet.needsEnd')]);
    else if (quietEnd.value) errors.push(['quiet_hours.start', t('compose.quiet.needsStart')]);
    if (maxRate.value !== '' || maxRate.validity.badInput) {
      const r = Number(maxRate.value);
      if (maxRate.validity.badInput || !Number.isFinite(r) || r <= 0) errors.push(['max_rate', t('compose.pace.rateBad')]);
      else d.max_rate = r;
    }
    if (deliverOver.value.trim()) d.deliver_over = deliverOver.value.trim();
    if (klass.value) d.class = klass.value;
    if (hold.checked) d.hold = true;
    if (dryRun.checked) d.dry_run = true;
    if (pastCap.checked) d.frequency_cap = false;
    return d;
  }

  // ---- Sending --------------------------------------------------------
  let sending = false;
  async function onSend(ev) {
    ev.preventDefault();
    if (sending) return;
    errs.clearAll();
    const errors = [];
    const req = {...message(errors), ...categoryFields(), audience: audience(errors), ...delivery(errors)};
    if (apps.current()) req.app = apps.current();
    if (errors.length) {
      errors.forEach(([f, m]) => errs.show(f, m));
      errs.focusFirst();
      return;
    }
    sending = true;
    send.disabled = true;
    send.setAttribute('aria-busy', 'true');
    try {
      // A hold waits for an approver, a dry run reaches no phone: both
      // go as they did. Any other send is reviewed first.
      if (!req.hold && !req.dry_run && !(await review(req))) return;
      // wait=0: answer at once (202 with the live object); the watch page
      // follows it from there.
      const b = await post('/push/broadcast?wait=0', req, {signal});
      clearDraft(apps.current());
      cancel(draftTimer);
      location.hash = `#/broadcasts/${b.id}`;
    } catch (err) {
      if (isQuiet(err)) return;
      showApi(err);
      errs.focusFirst();
    } finally {
      sending = false;
      send.disabled = false;
      send.removeAttribute('aria-busy');
    }
  }

  // review counts the audience afresh (users and devices, the category's
  // exclusions) and opens the review; true when the operator confirms.
  async function review(req) {
    const aud = req.audience;
    const capCat = {...capFields(), ...categoryFields()};
    // The count is the review's, not the send's: a preview refused for its
    // budget (429), a server error or a lost network still leaves the
    // review, with the count unknown and typing the word required. A 400
    // (the audience is wrong) stops here, as the send would.
    let r;
    try {
      r = aud.name
        ? await post(`/push/audiences/${encodeURIComponent(aud.name)}/preview`, {params: aud.params || {}, ...capCat}, {signal})
        : await post('/push/preview', {audience: aud, ...(req.app ? {app: req.app} : {}), ...capCat}, {signal});
    } catch (err) {
      if (isQuiet(err) || (err.status >= 400 && err.status < 500 && err.status !== 429)) throw err;
      r = {count: null, users: null, countError: err.message};
    }
    const cat = chosenCategory();
    const lf = (iso) => new Date(iso).toLocaleString(locale(), {dateStyle: 'medium', timeStyle: 'short'});
    let night = '';
    if (cat?.night) {
      const w = windowText(cat.night.window);
      night = cat.night.consent ? t('compose.consent.nightConsent', {window: w}) : t('compose.consent.night', {window: w});
    }
    return openReview(el, {
      audience: audienceWords(aud),
      users: r.users ?? null,
      devices: r.count,
      countError: r.countError,
      category: r.category || '',
      excluded: r.excluded_no_consent || 0,
      capped: r.capped_users || 0,
      night,
      // The category's quiet hours hold unless the form sets others.
      when: [...whenLines(req, lf), ...(cat?.quiet_hours && !req.quiet_hours
        ? [t('compose.when.quiet', {start: hhmm(cat.quiet_hours.start), end: hhmm(cat.quiet_hours.end)})] : [])],
      message: {title: title.value, body: body.value, image: imageShown, prefix: cat?.title_prefix || '', suffix: cat?.body_suffix || ''},
      warnings: checkMessage(),
      button: deliveryOf() !== 'now' ? t('compose.review.schedule') : r.count == null ? t('compose.review.sendUncounted') : t('compose.review.sendNow', {count: r.count}),
    });
  }

  // The audience of a request in words (never its JSON).
  function audienceWords(a) {
    if (a.all) return t('compose.aud.all');
    if (a.user_ids) return t('compose.review.ids', {count: a.user_ids.length});
    if (a.segment) return t('compose.review.segment', {name: a.segment});
    return t('compose.review.named', {name: a.name});
  }

  async function onTest(ev) {
    ev.preventDefault();
    errs.clearAll();
    const errors = [];
    const req = {...message(errors), ...categoryFields()};
    let ids = [];
    try {
      ids = parseIds(testIds.value);
      if (!ids.length) errors.push(['user_ids', t('compose.test.enterIds')]);
    } catch (e) {
      errors.push(['user_ids', e.message]);
    }
    if (errors.length) {
      errors.forEach(([f, m]) => errs.show(f, m));
      errs.focusFirst();
      return;
    }
    req.user_ids = ids;
    if (apps.current()) req.app = apps.current();
    if (phoneLocale.value) req.locale = phoneLocale.value; // the variant on the phone
    testSend.disabled = true;
    fill(testOut, h('p', {class: 'muted'}, t('compose.test.sending')));
    try {
      const report = await post('/push/test', req, {signal});
      fill(testOut, testReport(report));
    } catch (err) {
      if (isQuiet(err)) return;
      fill(testOut, h('p', {class: 'error-text'}, t('compose.test.failed'), ' ', apiWords(err)));
      showApi(err);
    } finally {
      testSend.disabled = false;
    }
  }

  // ---- Live preview ---------------------------------------------------
  let previewTimer = 0;
  let previewCtl = null;
  ctx.cleanup(() => previewCtl?.abort());

  // capLabel says which cap a broadcast would take, as the preview
  // answered it; '' when the deployment has none at all.
  function capLabel(r) {
    if (!r) return '';
    switch (r.frequency_cap_source) {
      case 'named': return t('compose.cap.named', {cap: r.frequency_cap, name: r.frequency_cap_name});
      case 'default': return t('compose.cap.default', {cap: r.frequency_cap});
      case 'off': return t('compose.cap.off');
      case 'bypass': return t('compose.cap.bypass');
      case 'transactional': return t('compose.cap.transactional');
      case 'dry_run': return t('compose.cap.dryRun');
      default: return '';
    }
  }

  // The consent lines of a preview answer r (null: none to show): how many
  // devices the category leaves out, and who its night window waits for.
  function setConsent(r) {
    const cat = r && r.category ? categoryOf(r.category) : null;
    previewConsent.hidden = !cat;
    previewNight.hidden = !cat?.night;
    if (!cat) return;
    const excluded = r.excluded_no_consent || 0;
    previewConsent.dataset.excluded = String(excluded);
    previewConsent.textContent = cat.consent
      ? t('compose.consent.leftOut', {devices: devices(r.count), count: excluded, category: cat.name})
      : t('compose.consent.none', {devices: devices(r.count), category: cat.name});
    if (cat.night) {
      const w = windowText(cat.night.window);
      previewNight.textContent = cat.night.consent
        ? t('compose.consent.nightConsent', {window: w})
        : t('compose.consent.night', {window: w});
    }
  }

  function setPreview(count, sample, error, capped, r, users = count) {
    setConsent(r);
    const cap = capLabel(r);
    previewCap.hidden = !cap;
    previewCap.textContent = cap;
    previewCapped.hidden = capped == null;
    previewCapped.textContent = capped == null ? '' : t('compose.preview.capped', {count: capped});
    previewCount.textContent = count;
    previewUsers.textContent = users;
    previewSample.textContent = sample.length ? sample.join(', ') : '—';
    fill(previewError, error || null);
    previewError.hidden = !error;
  }

  function schedulePreview() {
    cancel(previewTimer);
    previewCtl?.abort();
    setPreview('…', [], '');
    previewTimer = later(runPreview, DEBOUNCE);
  }

  // The fields of the form that decide the broadcast's cap (its class, a
  // bypass, a dry run), sent with the preview so that its capped count is
  // under the cap the broadcast would take. Pacing fields go only when
  // they read as the send would take them: a half-typed one must not
  // blank the preview.
  function capFields() {
    const d = {};
    if (klass.value) d.class = klass.value;
    const r = Number(maxRate.value);
    if (maxRate.value !== '' && !maxRate.validity.badInput && Number.isFinite(r) && r > 0) d.max_rate = r;
    const over = deliverOver.value.trim();
    if (/^(\d+(\.\d+)?(h|m|s|ms))+$/.test(over)) d.deliver_over = over;
    if (dryRun.checked) d.dry_run = true;
    if (pastCap.checked) d.frequency_cap = false;
    return d;
  }

  // The chosen category, as a request names it (nothing when none is
  // chosen: the server takes the default, or the named audience's own).
  function categoryFields() {
    return hasCategories && category.value ? {category: category.value} : {};
  }

  async function runPreview() {
    const errors = [];
    const aud = audience(errors);
    if (errors.length) {
      setPreview('—', [], errors[0][1]);
      return;
    }
    // With no category and no default there is none to count the consent
    // of (a named audience's own is on the picker: syncCategory).
    if (hasCategories && !category.value) {
      setPreview('—', [], t('compose.preview.chooseCategory'));
      return;
    }
    const ctl = new AbortController();
    previewCtl = ctl;
    try {
      const r = aud.name
        ? await post(`/push/audiences/${encodeURIComponent(aud.name)}/preview`, {params: aud.params || {}, ...capFields(), ...categoryFields()}, {signal: ctl.signal})
        : await post('/push/preview', {audience: aud, ...(apps.current() ? {app: apps.current()} : {}), ...capFields(), ...categoryFields()}, {signal: ctl.signal});
      if (ctl !== previewCtl) return;
      setPreview(num(r.count), r.sample_user_ids || [], '', r.capped_users, r, r.users == null ? '—' : num(r.users));
    } catch (err) {
      if (ctl !== previewCtl || isQuiet(err)) return;
      setPreview('—', [], errWords(err));
    }
  }

  // ---- Phone and labels -----------------------------------------------
  let imageShown = '';
  let imageTimer = 0;
  function updatePhone() {
    let ti = title.value;
    let b = body.value;
    const row = phoneLocale.value && locRows.find((r) => r.locale.value.trim() === phoneLocale.value);
    if (row) {
      ti = row.title.value || ti;
      b = row.body.value || b;
    }
    const cat = chosenCategory();
    phone.update({title: ti, body: b, image: imageShown, prefix: cat?.title_prefix || '', suffix: cat?.body_suffix || ''});
  }

  // The chosen category's rules, in plain words, under the picker.
  function showCategoryRules() {
    const cat = chosenCategory();
    const lines = [];
    if (category.disabled) lines.push(t('compose.rules.locked', {audience: audName.value, category: category.value}));
    if (cat) {
      lines.push(cat.consent ? t('compose.rules.consent', {category: cat.name}) : t('compose.rules.everyone'));
      if (cat.night) {
        const w = windowText(cat.night.window);
        lines.push(cat.night.consent ? t('compose.rules.nightConsent', {window: w}) : t('compose.rules.night', {window: w}));
      }
      if (cat.title_prefix) lines.push(t('compose.rules.prefix', {prefix: cat.title_prefix}));
      if (cat.body_suffix) lines.push(t('compose.rules.suffix', {suffix: cat.body_suffix.trim()}));
      if (cat.frequency_cap) lines.push(t('compose.rules.cap', {cap: cat.frequency_cap}));
      if (cat.quiet_hours) lines.push(t('compose.rules.quiet', {window: windowText(cat.quiet_hours)}));
    }
    fill(categoryRules, lines.map((l) => h('li', null, l)));
  }

  // The variant select lists the locales typed so far.
  function syncLocales() {
    const want = [...new Set(locRows.map((r) => r.locale.value.trim()).filter(Boolean))];
    const have = [...phoneLocale.options].slice(1).map((o) => o.value);
    if (want.join('\n') === have.join('\n')) return;
    const keep = phoneLocale.value;
    fill(phoneLocale, h('option', {value: ''}, t('compose.phone.default')), want.map((l) => h('option', {value: l}, l)));
    phoneLocale.value = want.includes(keep) ? keep : '';
  }

  function updateLabel() {
    const d = deliveryOf();
    send.textContent = dryRun.checked ? t('compose.dryRun') : hold.checked ? t('compose.hold') : d === 'now' ? t('compose.btn.send') : t('compose.btn.schedule');
  }

  // ---- Wiring ---------------------------------------------------------
  el.addEventListener('input', (ev) => {
    const tg = ev.target;
    if (tg === userIds) setKind('user_ids');
    if (tg.dataset?.param) setKind('named');
    if (tg === sendAt) setDelivery('at');
    if (tg === sendAtLocal) setDelivery('local');
    if (tg === userIds || tg.dataset?.param || tg === maxRate || tg === deliverOver) schedulePreview();
    if (tg === image) {
      cancel(imageTimer);
      imageTimer = later(() => {
        imageShown = image.value;
        updatePhone();
      }, DEBOUNCE);
    }
    if (tg.classList?.contains('loc-locale')) syncLocales();
    if (tg === title || tg === body || locList.contains(tg)) updatePhone();
    if (tg === title || tg === body || dataList.contains(tg) || tg === platform.webpush) checkMessage();
    keepDraft();
  });
  el.addEventListener('change', (ev) => {
    const tg = ev.target;
    if (tg.name === 'audience-kind') {
      markKind();
      schedulePreview();
    }
    if (tg === audName) {
      renderParams();
      setKind('named');
      schedulePreview();
    }
    if (tg === segName) {
      describeSegment();
      setKind('segment');
      schedulePreview();
    }
    if (tg.name === 'delivery') markDelivery();
    if (tg === phoneLocale) updatePhone();
    if (tg.name === 'delivery' || tg === hold || tg === dryRun) updateLabel();
    // The cap the broadcast would take, and so its capped count.
    if (tg === klass || tg === pastCap || tg === dryRun) schedulePreview();
    // Whose consent counts, and the labels on the phone.
    if (tg === category) {
      showCategoryRules();
      updatePhone();
      schedulePreview();
    }
    keepDraft();
  });

  // ---- Duplicate as new -----------------------------------------------
  function prefill(b) {
    const m = unlabeled(b.message || {}, b.consent);
    title.value = m.title || '';
    body.value = m.body || '';
    image.value = m.image || '';
    imageShown = image.value;
    for (const [k, v] of Object.entries(m.data || {})) addDataRow(k, v);
    for (const [l, v] of Object.entries(m.localized || {})) addLocRow(l, v.title || '', v.body || '');
    for (const [key] of PLATFORMS) {
      if (m[key] != null) platform[key].value = JSON.stringify(m[key], null, 2);
    }
    const notes = [t('compose.dup.prefilled', {id: b.id})];
    if (apps.several() && b.app && b.app !== apps.current()) {
      notes.push(t('compose.dup.otherApp', {was: b.app, now: apps.current()}));
    }
    const a = b.audience || {};
    if (a.all) setKind('all');
    else if (a.user_ids) {
      userIds.value = a.user_ids.join(', ');
      setKind('user_ids');
    } else if (a.name) {
      audName.value = a.name;
      if (audName.value === a.name) {
        renderParams(a.params || {});
        setKind('named');
      } else {
        notes.push(t('compose.dup.namedGone', {name: a.name}));
      }
    } else if (a.segment) {
      if (!chooseSegment(a.segment.name)) notes.push(t('compose.dup.segmentGone', {name: a.segment.name}));
    } else if (a.resend_of) {
      setKind('user_ids');
      notes.push(t('compose.dup.resend', {id: a.resend_of}));
    }

    if (b.send_at_local) {
      sendAtLocal.value = localValue(b.send_at_local);
      setDelivery('local');
    } else if (b.send_at) {
      sendAt.value = isoToLocalInput(b.send_at);
      setDelivery('at');
      if (new Date(b.send_at) < new Date()) notes.push(t('compose.dup.timePassed'));
    }
    if (b.quiet_hours) {
      quietStart.value = hhmm(b.quiet_hours.start);
      quietEnd.value = hhmm(b.quiet_hours.end);
    }
    if (b.max_rate != null) maxRate.value = String(b.max_rate);
    if (b.deliver_over) deliverOver.value = b.deliver_over;
    if (b.class) klass.value = b.class;
    if (hasCategories && b.category && !category.disabled) {
      category.value = b.category;
      if (category.value !== b.category) {
        category.value = categories.def;
        notes.push(t('compose.dup.categoryGone', {category: b.category}));
      }
    }
    hold.checked = b.status === 'held' || Boolean(b.hold_expires_at || b.released_at);
    dryRun.checked = Boolean(b.dry_run);
    fill(notice, ...notes.map((n) => h('p', null, n)));
    notice.hidden = false;
  }

  // Opens the form on the saved segment name; false if there is none.
  function chooseSegment(name) {
    segName.value = name;
    if (segName.value !== name) {
      segName.value = '';
      return false;
    }
    describeSegment();
    setKind('segment');
    return true;
  }

  // Called once the form is in the page (and prefilled).
  function refresh() {
    showCategoryRules();
    markKind();
    markDelivery();
    syncLocales();
    updateLabel();
    updatePhone();
    checkMessage();
    schedulePreview();
  }

  return {el, prefill, refresh, chooseSegment, restoreDraft};
}

// '' → undefined (not sent); otherwise a JSON object, or an error to show.
export function parseJSONObject(text) {
  if (!text.trim()) return {value: undefined};
  let v;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return {error: withDetails(t('compose.json.invalid'), e.message)};
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return {error: t('compose.json.notObject')};
  return {value: v};
}

// unlabeled is a stored message without the labels its category added
// (rules: the category it ran under; see phone.js's labeledMessage), so
// the form holds what was typed and the category chosen now adds its own.
export function unlabeled(m, rules) {
  const p = rules?.title_prefix || '';
  const x = rules?.body_suffix || '';
  if (!p && !x) return m;
  // A templated text has its label as a template literal: {{"(광고) "}}.
  const cut = (text, labels, front) => {
    for (const l of labels) {
      if (!l) continue;
      for (const v of [l, `{{${JSON.stringify(l)}}}`]) {
        if (front && text.startsWith(v)) return text.slice(v.length);
        if (!front && text.endsWith(v)) return text.slice(0, text.length - v.length);
      }
    }
    return text;
  };
  const strip = (v) => {
    const o = {...v};
    let t = v.title || '';
    let b = v.body || '';
    // The suffix ends the body, or is the body of a message without one.
    const tail = x.replace(/^[\n\r\t ]+/, '');
    b = tail && b === tail ? '' : cut(b, [x], false);
    // The prefix starts the title, or the body of a message without one.
    if (t) t = cut(t, [p], true);
    else b = cut(b, [p.replace(/^ +/, '')], true);
    if (v.title != null) o.title = t;
    if (v.body != null) o.body = b;
    return o;
  };
  const out = strip(m);
  if (m.localized) out.localized = Object.fromEntries(Object.entries(m.localized).map(([l, v]) => [l, strip(v)]));
  return out;
}

function paramText(v) {
  if (v == null) return '';
  return Array.isArray(v) ? v.join(', ') : String(v);
}

function hhmm(v) {
  return String(v || '').replace(/^(\d\d:\d\d):00$/, '$1');
}

// A daily window {start, end} as people write it: 21:00–08:00.
export function windowText(w) {
  return w ? `${hhmm(w.start)}–${hhmm(w.end)}` : '';
}

function devices(n) {
  return t('compose.devices', {count: n});
}

// The per-token results of a test send, as a table: one row per token,
// tr[data-outcome] (succeeded | failed).
export function testReport(report) {
  const rows = (report.results || []).map((r) => h('tr', {'data-outcome': r.outcome},
    h('td', {class: 'mono', title: r.token_id != null ? t('compose.test.tokenId', {id: r.token_id}) : null}, tokenPrefix(r.token)),
    h('td', {class: 'num'}, r.user_id ?? '—'),
    h('td', null, h('span', {class: ['badge', 'badge-' + r.outcome], 'data-status': r.outcome, title: r.outcome},
      tOr(`watch.test.outcome.${r.outcome}`, r.outcome))),
    h('td', null, r.code ? h('code', null, r.code) : '—'),
    h('td', {class: 'wrap'}, r.message || (r.invalidated ? t('compose.test.invalidated') : ''))));
  const missing = report.users_without_tokens || [];
  return h('div', null,
    h('p', null, t('compose.test.summary', {ok: report.succeeded ?? 0, failed: report.failed ?? 0})),
    table({id: 'test-results'}, [t('compose.test.colToken'), t('compose.test.colUser'), t('compose.test.colOutcome'), t('compose.test.colCode'), t('compose.test.colMessage')],
      rows.length ? rows : emptyRow(5, t('compose.test.none'))),
    missing.length ? h('ul', {class: 'plain'}, missing.map((u) =>
      h('li', null, t('compose.test.userWithout', {id: u.user_id, reason: String(u.reason).replaceAll('_', ' ')})))) : null);
}

function tokenPrefix(t) {
  const s = String(t || '');
  return s.length > 12 ? s.slice(0, 12) + '…' : s;
}
