// Sign in with an admin token, or through the OIDC provider. The server
// answers the session object and sets the HttpOnly cookie; the token
// itself is not kept anywhere in JS. The provider's sign-in is a plain
// link: the browser goes to the provider and comes back to /console/
// signed in. The session answer says which ways are open (sign_in).

import {api} from './api.js';
import {h, addDescribedBy, add} from './dom.js';
import {t} from './i18n.js';

export async function render(ctx) {
  const {root, signal} = ctx;
  let ways = {token: true};
  try {
    const s = await api('GET', '/console/api/session', undefined, {signal, handle401: false});
    if (s && s.sign_in) ways = s.sign_in;
  } catch (err) {
    if (err.name === 'AbortError') return;
    // The server is unreachable: offer the token form, which says so.
  }
  const provider = ways.oidc
    ? h('div', {class: 'actions signin-oidc'},
      h('a', {id: 'signin-oidc', class: 'btn btn-primary', href: ways.oidc.login_url}, t('signin.withProvider', {provider: ways.oidc.provider})))
    : null;

  const token = h('input', {
    id: 'signin-token', type: 'password', name: 'token', required: true,
    autocomplete: 'current-password', spellcheck: 'false', autocapitalize: 'off',
  });
  // Present from the start (empty and hidden) so that screen readers
  // announce it when the text arrives (role=alert).
  const error = h('p', {id: 'signin-error', class: 'error-text', role: 'alert', hidden: true});
  addDescribedBy(token, 'signin-error');
  const submit = h('button', {id: 'signin-submit', type: 'submit', class: 'btn btn-primary'}, t('signin.submit'));

  const showError = (text) => {
    error.textContent = text;
    error.hidden = !text;
    if (text) token.setAttribute('aria-invalid', 'true');
    else token.removeAttribute('aria-invalid');
  };
  token.addEventListener('input', () => showError(''));

  const form = h('form', {class: 'card signin-card', novalidate: true, on: {submit: onSubmit}},
    h('h1', null, t('signin.title')),
    ctx.flash ? h('p', {class: 'notice', role: 'status'}, ctx.flash) : null,
    provider,
    ways.token ? h('div', {class: 'field'},
      h('label', {for: 'signin-token'}, provider ? t('signin.orToken') : t('signin.token')),
      token,
      error) : null,
    ways.token ? h('div', {class: 'actions'}, submit) : null,
    whereIsTheToken(ways));

  async function onSubmit(ev) {
    ev.preventDefault();
    const value = token.value.trim();
    if (!value) {
      showError(t('signin.enterToken'));
      token.focus();
      return;
    }
    showError('');
    submit.disabled = true;
    submit.textContent = t('signin.signingIn');
    try {
      // No CSRF header yet: there is no session. A 401 here is a bad token,
      // not an ended session, so the global 401 handling stays out of it.
      const session = await api('POST', '/console/api/session', {token: value}, {signal, handle401: false});
      ctx.signedIn(session);
    } catch (err) {
      if (err.name === 'AbortError') return;
      showError(err.status === 401 && !err.message ? t('signin.refused') : err.message);
      submit.disabled = false;
      submit.textContent = t('signin.submit');
      token.focus();
      token.select();
    }
  }

  add(root, h('div', {class: 'signin-wrap'}, form));
  if (ways.token) token.focus();
  else document.getElementById('signin-oidc')?.focus();
}

// Where the token is: a first-time operator has none in hand. The hint is
// linked to the input, so a screen reader reads it with the field.
function whereIsTheToken(ways) {
  const items = [];
  if (ways.oidc) items.push(h('li', null, t('signin.where.oidc')));
  if (ways.token) {
    items.push(
      h('li', null, t('signin.where.local.before'), h('code', null, 'make run'), t('signin.where.local.middle'),
        h('code', null, '.run/admin-token'), t('signin.where.local.after')),
      h('li', null, t('signin.where.prod.before'), h('code', null, 'PUSHFAN_ADMIN_TOKENS'), t('signin.where.prod.after')),
      h('li', null, t('signin.where.key')));
  }
  if (!items.length) return null;
  return h('div', {id: 'signin-where', class: 'hint signin-where'},
    h('p', null, t('signin.where.title')), h('ul', null, items));
}
