// Message templates in compose: "Use a template" fills the message from
// one the team saved (GET /push/templates), "Save as template" keeps the
// message typed now under a name (POST, or PUT to replace one of that
// name). A template's text may hold variables ({{.first_name}}), which a
// named audience's columns fill per user when it is sent.

import {api, post} from './api.js';
import {h, fill, isQuiet} from './dom.js';
import {t} from './i18n.js';
import {apiWords} from './compose_checks.js';

// createTemplates builds the bar; read() is the message typed now
// ({title, body, data, link}), use(template) fills the form with one.
export function createTemplates({list, read, use}) {
  let templates = [...list];
  const pick = h('select', {id: 'tpl-use'});
  const status = h('p', {id: 'tpl-status', class: 'hint', role: 'status'});
  const name = h('input', {id: 'tpl-name', type: 'text', autocomplete: 'off', maxlength: '64'});
  const saveBtn = h('button', {id: 'tpl-save', type: 'button', class: 'btn btn-small'}, t('compose.tpl.save'));
  const okBtn = h('button', {id: 'tpl-save-ok', type: 'button', class: 'btn btn-small btn-primary'}, t('compose.tpl.saveOk'));
  const backBtn = h('button', {id: 'tpl-save-cancel', type: 'button', class: 'btn btn-small btn-quiet'}, t('compose.tpl.cancel'));
  const saveBox = h('div', {class: 'row row-end', id: 'tpl-save-box', hidden: true},
    h('div', {class: 'field'}, h('label', {for: name.id}, t('compose.tpl.name')), name),
    h('div', {class: 'field'}, okBtn), h('div', {class: 'field'}, backBtn));

  function options() {
    const keep = pick.value;
    fill(pick, h('option', {value: ''}, templates.length ? t('compose.tpl.choose') : t('compose.tpl.none')),
      templates.map((x) => h('option', {value: x.name}, x.name)));
    pick.value = templates.some((x) => x.name === keep) ? keep : '';
  }
  options();

  pick.addEventListener('change', () => {
    const x = templates.find((y) => y.name === pick.value);
    if (!x) return;
    use(x);
    status.textContent = t('compose.tpl.used', {name: x.name});
  });
  saveBtn.addEventListener('click', () => {
    saveBox.hidden = false;
    name.value = pick.value;
    name.focus();
  });
  backBtn.addEventListener('click', () => {
    saveBox.hidden = true;
    saveBtn.focus();
  });
  async function save() {
    const n = name.value.trim();
    if (!n) {
      status.textContent = t('compose.tpl.needsName');
      name.focus();
      return;
    }
    const m = read();
    const body = {title: m.title, body: m.body, data: m.data, link: m.link || ''};
    okBtn.disabled = true;
    try {
      const exists = templates.some((x) => x.name === n);
      const saved = exists
        ? await api('PUT', `/push/templates/${encodeURIComponent(n)}`, body)
        : await post('/push/templates', {name: n, ...body});
      templates = [...templates.filter((x) => x.name !== n), saved].sort((a, b) => a.name.localeCompare(b.name));
      options();
      pick.value = n;
      saveBox.hidden = true;
      fill(status, t('compose.tpl.saved', {name: n}));
    } catch (err) {
      if (isQuiet(err)) return;
      fill(status, t('compose.tpl.notSaved'), ' ', apiWords(err));
    } finally {
      okBtn.disabled = false;
    }
  }
  okBtn.addEventListener('click', save);
  name.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter') {
      ev.preventDefault();
      save();
    }
  });

  const el = h('div', {class: 'block template-bar', id: 'tpl-bar'},
    h('div', {class: 'row row-end'},
      h('div', {class: 'field'}, h('label', {for: pick.id}, t('compose.tpl.use')), pick),
      h('div', {class: 'field'}, saveBtn)),
    saveBox,
    h('p', {class: 'hint'}, t('compose.tpl.vars')),
    status);
  return {el};
}
