// Field errors for a form: a message next to the input the API's `field`
// path names (or the nearest block whose path is a prefix of it), linked
// with aria-describedby and flagged aria-invalid; a message no input
// matches goes to the form-level box. An error clears as soon as the user
// changes what it is about.

import {h, addDescribedBy, removeDescribedBy, add} from './dom.js';
import {t as tr} from './i18n.js';

// "audience.user_ids[3]" → ["audience", "user_ids", "3"]
export function splitPath(path) {
  return String(path || '').split(/[.[\]]+/).filter(Boolean);
}

// The target for a plain labelled input: its .field block holds the error.
export function inputTarget(input) {
  if (!input) return null;
  const block = input.closest('.field') || input.parentElement;
  return {input, container: block, scope: block};
}

// root: where input/change events are watched (both compose forms);
// formError: the form-level box; resolve(path) → {input, container, scope}
// or null, where container receives the message and a change inside
// scope clears it.
export function createFieldErrors(root, formError, resolve) {
  let shown = []; // [{path, el, input, scope}]
  let seq = 0;

  function show(path, message) {
    const t = path ? resolve(path) : null;
    if (!t) {
      formMessage(path && !message.includes(path) ? tr('fielderrors.at', {field: path, message}) : message);
      return;
    }
    drop((e) => e.path === path); // one message per path: the newest
    const id = `field-error-${++seq}`;
    const el = h('p', {class: 'field-error', id, 'data-error-for': path}, message);
    add(t.container, el);
    if (t.input) {
      t.input.setAttribute('aria-invalid', 'true');
      addDescribedBy(t.input, id);
    }
    shown.push({path, el, input: t.input, scope: t.scope || t.container});
  }

  function formMessage(message) {
    add(formError, h('p', null, message));
    formError.hidden = false;
  }

  // Shows an API error where it belongs (a 400 names its field).
  function showApi(err) {
    show(err.field, err.message);
  }

  function drop(pred) {
    const keep = [];
    for (const e of shown) {
      if (!pred(e) && e.el.isConnected) {
        keep.push(e);
        continue;
      }
      e.el.remove();
      if (e.input) {
        removeDescribedBy(e.input, e.el.id);
        // Still invalid while another message points at the same input.
        if (!shown.some((o) => o !== e && o.input === e.input && !pred(o) && o.el.isConnected)) {
          e.input.removeAttribute('aria-invalid');
        }
      }
    }
    shown = keep;
  }

  function clearFor(node) {
    drop((e) => e.scope.contains(node));
  }

  function clearAll() {
    drop(() => true);
    formError.replaceChildren();
    formError.hidden = true;
  }

  function clearPath(path) {
    drop((e) => e.path === path);
  }

  // The first message's input gets the focus, so the keyboard lands on
  // what needs fixing; else the form-level box is brought into view.
  function focusFirst() {
    const first = shown.find((e) => e.el.isConnected);
    if (first?.input && typeof first.input.focus === 'function' && first.input.tabIndex >= -1) {
      first.input.focus();
    } else if (!formError.hidden) {
      formError.focus();
    }
    (first?.el || formError).scrollIntoView({block: 'center', behavior: 'smooth'});
  }

  const onChange = (ev) => clearFor(ev.target);
  root.addEventListener('input', onChange);
  root.addEventListener('change', onChange);

  return {show, showApi, formMessage, clearFor, clearAll, clearPath, focusFirst, count: () => shown.length};
}
