// The segment builder (senders): a new segment (#/segments/_new) or the
// next version of one (#/segments/NAME/edit).
//
// Groups ("All of", "Any of", "None of") hold conditions and groups, up
// to four deep (the API's limit); a condition is a field, an operator in
// words limited to the ones the field's kind takes, and a value input fit
// for it: a list for "is any of", a number and a unit for "within", a date
// or a date and time. A string or version value offers the values the
// data has, with their devices (segvalues.js), as chips and in the
// input's list; any other can be typed. While the operator builds, the
// filter is counted (debounced); a mistake the API names
// (filter.and[2].value) shows next to that condition. Saving makes the segment, or its next version, and
// opens its page, where it can be sent to.

import {get, post, api, may} from './api.js';
import {h, field, fill, add, isQuiet} from './dom.js';
import {localInputToRFC3339, isoToLocalInput} from './format.js';
import {createFieldErrors, inputTarget} from './fielderrors.js';
import {createCounter} from './segcount.js';
import {createValues, devices, shortDevices} from './segvalues.js';
import {loadFields} from './segments.js';
import {t} from './i18n.js';
import {ATTRIBUTE, modes, units, fieldLabel, sortFields, opChoices, valueShape, fromFilter, toFilter, newGroup, newCond} from './segfilter.js';
import * as apps from './apps.js';

const DEBOUNCE = 400;
// Groups nest at most this deep (the API's MaxDepth): the top group is
// level 1. "None of" around several conditions is two levels (not, or).
const MAX_LEVELS = 4;
// Chips shown at once; the rest of the values are under "N more".
const CHIPS = 12;

// Values suggested for a field when the data's cannot be read (the common
// ones), with the values already typed in the builder.
const SUGGEST = {
  platform: ['android', 'ios', 'web'],
  locale: ['en', 'en-US', 'en-GB', 'es', 'fr', 'de', 'it', 'pt-BR', 'ja', 'ko', 'zh-CN'],
};

export async function render(ctx) {
  const {root, signal, params} = ctx;
  const name = params[0] || '';
  add(root, h('p', null, h('a', {href: name ? `#/segments/${encodeURIComponent(name)}` : '#/segments'}, name ? t('segbuilder.back', {name}) : t('segments.all'))));
  add(root, h('h1', {tabindex: '-1'}, name ? t('segbuilder.editHeading', {name}) : t('app.title.newSegment')));
  if (!may('sender')) {
    add(root, h('p', {class: 'alert alert-info', id: 'builder-denied'}, t('segbuilder.denied')));
    return;
  }
  const [fields, seg] = await Promise.all([
    loadFields(signal),
    name ? get(`/push/segments/${encodeURIComponent(name)}`, {signal}) : Promise.resolve(null),
  ]);
  if (signal.aborted) return;
  if (seg) document.title = `${t('segbuilder.editTitle', {name: seg.name})} · pushfan`;
  add(root, builder(ctx, sortFields(fields), seg));
}

function builder(ctx, fields, seg) {
  const {signal} = ctx;
  const byName = Object.fromEntries(fields.map((f) => [f.name, f]));
  let seq = 0;
  let timer = 0;
  ctx.cleanup(() => clearTimeout(timer));
  const valuesOf = createValues(signal);

  const tree = seg ? fromFilter(seg.filter) : newGroup('all', [newCond()]);

  // ---- Name and description -------------------------------------------
  const nameInput = h('input', {id: 'seg-name', type: 'text', autocomplete: 'off', spellcheck: 'false', maxlength: 64,
    value: seg?.name || '', disabled: Boolean(seg), placeholder: 'android-pro-users', pattern: '[a-z][a-z0-9_-]*'});
  const descInput = h('textarea', {id: 'seg-description', rows: 2, maxlength: 512, value: seg?.description || ''});
  const formError = h('div', {id: 'form-error', class: 'alert', role: 'alert', tabindex: '-1', hidden: true});

  const treeBox = h('div', {id: 'seg-tree', class: 'seg-tree'});
  const countBox = h('p', {id: 'seg-count', class: 'count-out', 'aria-live': 'polite'});
  const save = h('button', {type: 'submit', id: 'seg-save', class: 'btn btn-primary'}, seg ? t('segbuilder.saveVersion', {n: seg.version + 1}) : t('segbuilder.save'));

  const form = h('form', {id: 'segment-form', class: 'segment-form', novalidate: true, on: {submit: onSave}},
    formError,
    h('fieldset', {class: 'card'},
      h('legend', null, t('segbuilder.who')),
      h('p', {class: 'hint'}, t('segbuilder.whoHint')),
      treeBox,
      h('div', {class: 'preview-box'}, h('p', {class: 'block-label'}, t('segbuilder.rightNow')), countBox)),
    h('fieldset', {class: 'card'},
      h('legend', null, t('common.save')),
      field(t('segments.col.name'), nameInput, seg ? t('segbuilder.nameKept') : t('segbuilder.nameHint')),
      field(t('segbuilder.description'), descInput, t('segbuilder.descriptionHint'))),
    h('div', {class: 'actions'}, save));

  const errs = createFieldErrors(form, formError, resolve);
  const counter = createCounter(countBox, signal, (err) => errs.showApi(err));

  // ---- Groups and conditions -------------------------------------------
  function renderTree() {
    fill(treeBox, groupEl(tree, null, 1));
  }

  function groupEl(g, parent, level) {
    g.id = g.id || ++seq;
    const mode = h('select', {id: `group-${g.id}-mode`, class: 'group-mode', 'aria-label': t('segbuilder.modeLabel'), value: g.mode,
      on: {change: (ev) => {
        g.mode = ev.target.value;
        g.el.dataset.mode = g.mode;
        changed();
      }}},
    modes().map(([m, label]) => h('option', {value: m}, label)));
    mode.value = g.mode;
    const kids = h('ol', {class: 'group-children'});
    for (const c of g.children) add(kids, c.type === 'group' ? groupEl(c, g, level + 1) : condEl(c, g));
    const buttons = h('div', {class: 'group-buttons'},
      h('button', {type: 'button', class: 'btn btn-small add-cond', id: `group-${g.id}-add-cond`, on: {click: () => {
        const c = newCond();
        g.children.push(c);
        renderTree();
        document.getElementById(`cond-${c.id}-field`)?.focus();
        changed();
      }}}, t('segbuilder.addCond')),
      level < MAX_LEVELS ? h('button', {type: 'button', class: 'btn btn-small add-group', id: `group-${g.id}-add-group`, on: {click: () => {
        const sub = newGroup(g.mode === 'all' ? 'any' : 'all', [newCond()]);
        g.children.push(sub);
        renderTree();
        document.getElementById(`group-${sub.id}-mode`)?.focus();
        changed();
      }}}, t('segbuilder.addGroup')) : null,
      parent ? h('button', {type: 'button', class: 'btn btn-small btn-quiet', 'aria-label': t('segbuilder.removeGroupLabel'), on: {click: () => {
        parent.children.splice(parent.children.indexOf(g), 1);
        renderTree();
        changed();
      }}}, t('segbuilder.removeGroup')) : null);
    g.errorSlot = h('div', {class: 'group-errors'});
    g.el = h('li', {class: ['seg-group', `seg-level-${level}`], id: `group-${g.id}`, 'data-mode': g.mode},
      h('div', {class: 'group-head'}, mode, h('span', {class: 'muted'}, t('segbuilder.these'))),
      g.errorSlot, kids, buttons);
    return parent ? g.el : h('ol', {class: 'group-root'}, g.el);
  }

  function condEl(c, parent) {
    c.id = c.id || ++seq;
    const fieldSel = h('select', {id: `cond-${c.id}-field`, class: 'cond-field', 'aria-label': t('segbuilder.field')},
      h('option', {value: ''}, t('segbuilder.chooseField')),
      fields.filter((f) => !f.name.startsWith(ATTRIBUTE)).map((f) => h('option', {value: f.name}, fieldLabel(f.name))),
      fields.some((f) => f.name.startsWith(ATTRIBUTE))
        ? h('optgroup', {label: t('segbuilder.attributes')}, fields.filter((f) => f.name.startsWith(ATTRIBUTE)).map((f) => h('option', {value: f.name}, fieldLabel(f.name))))
        : null);
    fieldSel.value = c.field;
    if (c.field && fieldSel.value !== c.field) {
      // A field this deployment no longer has (its schema changed): shown,
      // so the API's refusal has somewhere to go.
      add(fieldSel, h('option', {value: c.field}, t('segbuilder.notHere', {field: c.field})));
      fieldSel.value = c.field;
    }
    const opSel = h('select', {id: `cond-${c.id}-op`, class: 'cond-op', 'aria-label': t('segbuilder.condition')});
    const valueBox = h('div', {class: 'cond-value', id: `cond-${c.id}-valuebox`});
    c.errorSlot = h('div', {class: 'cond-errors'});
    c.el = h('li', {class: 'seg-cond', id: `cond-${c.id}`},
      h('div', {class: 'cond-row'}, fieldSel, opSel, valueBox,
        h('button', {type: 'button', class: 'btn btn-small btn-quiet', 'aria-label': t('segbuilder.removeCondLabel'), on: {click: () => {
          parent.children.splice(parent.children.indexOf(c), 1);
          renderTree();
          changed();
        }}}, t('segbuilder.remove'))),
      c.errorSlot);
    c.inputs = {field: fieldSel, op: opSel, value: null};

    const fillOps = () => {
      const f = byName[c.field];
      const choices = f ? opChoices(f) : [];
      fill(opSel, choices.length ? choices.map(([v, words]) => h('option', {value: v}, words)) : h('option', {value: ''}, '—'));
      opSel.disabled = !choices.length;
      if (!choices.some(([v]) => v === c.op)) c.op = choices[0]?.[0] || '';
      opSel.value = c.op;
    };
    fieldSel.addEventListener('change', () => {
      c.field = fieldSel.value;
      c.value = undefined;
      c.text = undefined;
      fillOps();
      fillValue(c, valueBox);
      changed();
    });
    opSel.addEventListener('change', () => {
      const before = valueShape(byName[c.field]?.kind, c.op);
      c.op = opSel.value;
      // A value of another shape (a list for "is", a date for "within")
      // is dropped; one of the same shape stays.
      if (valueShape(byName[c.field]?.kind, c.op) !== before) c.value = c.text = undefined;
      fillValue(c, valueBox);
      changed();
    });
    fillOps();
    fillValue(c, valueBox);
    return c.el;
  }

  // The value input of c, by the shape its op takes; c.read() gives the
  // API's value, or {missing} / {error} while it is not one.
  function fillValue(c, box) {
    const f = byName[c.field];
    const id = `cond-${c.id}-value`;
    if (!f || !c.op) {
      fill(box);
      c.inputs.value = null;
      c.read = () => ({missing: t('segbuilder.missing.field')});
      return;
    }
    const shape = valueShape(f.kind, c.op);
    const onInput = (fn) => (ev) => {
      c.value = fn(ev);
      changed();
    };
    switch (shape) {
      case 'none': {
        fill(box);
        c.inputs.value = null;
        c.read = () => ({value: c.op === 'exists_true'});
        return;
      }
      case 'bool': {
        const sel = h('select', {id, 'aria-label': t('segbuilder.value'), on: {change: onInput((ev) => ev.target.value === 'true')}},
          h('option', {value: 'true'}, t('common.yes')), h('option', {value: 'false'}, t('common.no')));
        sel.value = c.value === false ? 'false' : 'true';
        c.value = sel.value === 'true';
        valuesOf(f).then((r) => {
          for (const v of r?.values || []) {
            const o = [...sel.options].find((x) => x.value === v.value);
            if (o) o.textContent = `${o.value === 'true' ? t('common.yes') : t('common.no')} (${devices(v.tokens, r.sampled)})`;
          }
        });
        fill(box, sel);
        c.inputs.value = sel;
        c.read = () => ({value: c.value});
        return;
      }
      case 'duration': {
        const m = String(c.value ?? '').match(/^(\d+)([mhdw])$/);
        const n = h('input', {id, type: 'number', min: '1', step: '1', inputmode: 'numeric', class: 'cond-number', 'aria-label': t('segbuilder.howLong'), value: m ? m[1] : ''});
        const unit = h('select', {id: `${id}-unit`, 'aria-label': t('segbuilder.unit')}, units().map(([u, w]) => h('option', {value: u}, w)));
        unit.value = m ? m[2] : 'd';
        const read = () => (n.value ? `${n.value}${unit.value}` : undefined);
        n.addEventListener('input', onInput(read));
        unit.addEventListener('change', onInput(read));
        fill(box, n, unit);
        c.inputs.value = n;
        c.read = () => {
          if (!n.value) return {missing: t('segbuilder.missing.howLong')};
          if (!/^[1-9]\d*$/.test(n.value)) return {error: t('segbuilder.wholeFrom1')};
          return {value: read()};
        };
        return;
      }
      case 'date': {
        const d = h('input', {id, type: 'date', 'aria-label': t('segbuilder.date'), value: typeof c.value === 'string' ? c.value : ''});
        d.addEventListener('input', onInput((ev) => ev.target.value));
        d.addEventListener('change', onInput((ev) => ev.target.value));
        fill(box, d);
        c.inputs.value = d;
        c.read = () => (d.value ? {value: d.value} : {missing: t('segbuilder.missing.date')});
        return;
      }
      case 'instant': {
        const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || t('segbuilder.yourZone');
        const d = h('input', {id, type: 'datetime-local', 'aria-label': t('segbuilder.dateTime', {zone}), title: t('segbuilder.yourTime', {zone}),
          value: typeof c.value === 'string' ? isoToLocalInput(c.value) : ''});
        const read = (ev) => localInputToRFC3339(ev.target.value) || undefined;
        d.addEventListener('input', onInput(read));
        d.addEventListener('change', onInput(read));
        fill(box, d);
        c.inputs.value = d;
        c.read = () => (d.value ? {value: localInputToRFC3339(d.value)} : {missing: t('segbuilder.missing.dateTime')});
        return;
      }
      case 'list': {
        // c.text is what was typed: kept when the tree is drawn again.
        const text = c.text ?? (Array.isArray(c.value) ? c.value.join(', ') : '');
        const input = h('input', {id, type: 'text', class: 'cond-list', 'aria-label': t('segbuilder.values'), autocomplete: 'off', spellcheck: 'false',
          value: text, placeholder: f.kind === 'version' ? '5.9, 5.10' : t('segbuilder.listPlaceholder')});
        input.addEventListener('input', () => {
          c.text = input.value;
          changed();
        });
        c.text = text;
        fill(box, input, suggestions(c, f, (v) => {
          const have = splitList(input.value);
          if (!have.includes(v)) input.value = [...have, v].join(', ');
          c.text = input.value;
          changed();
        }));
        c.inputs.value = input;
        c.read = () => {
          const parts = splitList(input.value);
          if (!parts.length) return {missing: t('segbuilder.missing.values')};
          const out = [];
          for (const p of parts) {
            const r = scalar(f, p);
            if (r.error) return r;
            out.push(r.value);
          }
          return {value: out};
        };
        return;
      }
      default: {
        const offers = f.kind === 'string' || f.kind === 'version';
        const list = offers ? h('datalist', {id: `${id}-values`}) : null;
        const input = h('input', {id, type: 'text', 'aria-label': t('segbuilder.value'), autocomplete: 'off', spellcheck: 'false',
          value: c.text ?? (c.value == null ? '' : String(c.value)), inputmode: f.kind === 'int' ? 'numeric' : null,
          placeholder: f.kind === 'version' ? '5.10' : '', list: list ? list.id : null});
        input.addEventListener('input', () => {
          c.text = input.value;
          changed();
        });
        c.text = input.value;
        fill(box, input, list, suggestions(c, f, (v) => {
          input.value = v;
          c.text = v;
          changed();
        }, list));
        c.inputs.value = input;
        c.read = () => (input.value.trim() === '' ? {missing: t('segbuilder.missing.value')} : scalar(f, input.value.trim()));
      }
    }
  }

  // The values suggested for f: the data's, the most common first with
  // their devices (or the common ones when they cannot be read), then the
  // ones typed in the builder's other conditions on f. Chips to pick (the
  // first CHIPS, the rest under "N more"), and the options of datalist, a
  // single value's input's list. Filled when the data's values are known.
  function suggestions(c, f, pick, datalist) {
    if (f.kind !== 'string' && f.kind !== 'version') return null;
    const box = h('div', {class: 'suggest', role: 'group', 'aria-label': t('segbuilder.suggested', {field: fieldLabel(f.name)}), hidden: true});
    const typed = [];
    walk(tree, (o) => {
      if (o !== c && o.field === f.name && o.text) typed.push(...splitList(o.text));
    });
    valuesOf(f).then((r) => {
      const known = r ? r.values : [...(SUGGEST[f.name] || []), ...(f.name === 'app' ? apps.list().map((a) => a.name) : [])].map((value) => ({value}));
      const seen = new Set();
      const values = [...known, ...typed.map((value) => ({value}))].filter((v) => !seen.has(v.value) && seen.add(v.value));
      const chip = (v) => h('button', {type: 'button', class: 'chip', 'data-value': v.value, 'data-tokens': v.tokens,
        title: v.tokens == null ? null : devices(v.tokens, r.sampled), on: {click: () => pick(v.value)}},
      v.value, v.tokens == null ? null : h('span', {class: 'chip-count', 'aria-hidden': 'true'}, shortDevices(v.tokens, r.sampled)));
      fill(box, values.slice(0, CHIPS).map(chip), values.length > CHIPS
        ? h('details', {class: 'suggest-more'}, h('summary', null, t('segbuilder.more', {count: values.length - CHIPS})), values.slice(CHIPS).map(chip))
        : null);
      box.hidden = !values.length;
      if (datalist) {
        fill(datalist, values.map((v) => h('option', {value: v.value, label: v.tokens == null ? null : devices(v.tokens, r.sampled)})));
      }
    });
    return box;
  }

  // ---- The filter, its count, its errors ---------------------------------
  // build() is the API's filter, or null with the first unfinished
  // condition's reason (missing) or mistake (error) in problems.
  function build(problems) {
    const f = toFilter(tree, (c) => {
      const r = c.read ? c.read() : {missing: t('segbuilder.missing.field')};
      if (r.missing || r.error) {
        problems.push({node: c, ...r});
        return null;
      }
      return {field: c.field, op: c.op.startsWith('exists') ? 'exists' : c.op, value: r.value};
    });
    walk(tree, (n) => {
      if (n.type === 'group' && !n.children.length) problems.push({node: n, missing: t('segbuilder.missing.groupEmpty')});
    });
    return f;
  }

  function changed() {
    clearTimeout(timer);
    clearFilterErrors();
    timer = setTimeout(recount, DEBOUNCE);
  }

  function recount() {
    const problems = [];
    const f = build(problems);
    const bad = problems.find((p) => p.error);
    if (bad) {
      showAt(bad.node, bad.error);
      counter.idle(t('segcount.fixBelow'));
      return;
    }
    if (!f) {
      counter.idle(problems.length === 1 && !tree.children.length ? t('segbuilder.idle.add') : t('segbuilder.idle.finish'));
      return;
    }
    counter.count(f);
  }

  function clearFilterErrors() {
    for (const el of treeBox.querySelectorAll('.field-error')) errs.clearFor(el);
  }

  function showAt(node, message) {
    errs.show(node.path || 'filter', message);
  }

  // Where an API field path points: name, description, or the condition
  // or group whose path is the longest prefix of it (filter.and[2].op →
  // the third condition's operator).
  function resolve(path) {
    if (path === 'name') return inputTarget(nameInput);
    if (path === 'description') return inputTarget(descInput);
    if (!path.startsWith('filter')) return null;
    let best = null;
    walk(tree, (n) => {
      if (n.path && (path === n.path || path.startsWith(n.path + '.') || path.startsWith(n.path + '[')) && (!best || n.path.length > best.path.length)) best = n;
    });
    if (!best) return null;
    if (best.type === 'group') return {container: best.errorSlot, input: best.el.querySelector('.group-mode'), scope: best.el};
    const rest = path.slice(best.path.length);
    const input = rest.startsWith('.field') ? best.inputs.field : rest.startsWith('.op') ? best.inputs.op : best.inputs.value || best.inputs.op;
    return {container: best.errorSlot, input, scope: best.el};
  }

  // ---- Saving -------------------------------------------------------------
  let saving = false;
  async function onSave(ev) {
    ev.preventDefault();
    if (saving) return;
    errs.clearAll();
    const problems = [];
    const f = build(problems);
    const name = nameInput.value.trim();
    if (!seg && !name) errs.show('name', t('segbuilder.missing.name'));
    for (const p of problems) showAt(p.node, p.error || p.missing);
    if (!f && !problems.length) errs.formMessage(t('segbuilder.missing.cond'));
    if (errs.count() || !f) {
      errs.focusFirst();
      return;
    }
    saving = true;
    save.disabled = true;
    save.setAttribute('aria-busy', 'true');
    try {
      const body = {description: descInput.value, filter: f};
      const saved = seg
        ? await api('PUT', `/push/segments/${encodeURIComponent(seg.name)}`, body, {signal})
        : await post('/push/segments', {name, ...body}, {signal});
      location.hash = `#/segments/${encodeURIComponent(saved.name)}`;
    } catch (err) {
      if (isQuiet(err)) return;
      errs.showApi(err);
      errs.focusFirst();
    } finally {
      saving = false;
      save.disabled = false;
      save.removeAttribute('aria-busy');
    }
  }

  renderTree();
  recount();
  return form;
}

function walk(node, fn) {
  fn(node);
  if (node.type === 'group') node.children.forEach((c) => walk(c, fn));
}

function splitList(text) {
  return String(text || '').split(',').map((s) => s.trim()).filter(Boolean);
}

// One value of f's kind from its text, or {error}.
function scalar(f, text) {
  if (f.kind === 'int') {
    if (!/^-?\d+$/.test(text) || !Number.isSafeInteger(Number(text))) return {error: t('segbuilder.notWhole', {value: text})};
    return {value: Number(text)};
  }
  if (f.kind === 'version' && !/^\d+(\.\d+){0,3}$/.test(text)) return {error: t('segbuilder.notVersion', {value: text})};
  if (f.kind === 'date' && !/^\d{4}-\d\d-\d\d$/.test(text)) return {error: t('segbuilder.notDate', {value: text})};
  return {value: text};
}
