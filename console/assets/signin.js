// Sign in with an admin token, or through the OIDC provider. The server
// answers the session object and sets the HttpOnly cookie; the token
// itself is not kept anywhere in JS. The provider's sign-in is a plain
// link: the browser goes to the provider and comes back to /console/
// signed in. The session answer says which ways are open (sign_in).

import {api} from './api.js';
import {h, addDescribedBy, add} from './dom.js';

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
      h('a', {id: 'signin-oidc', class: 'btn btn-primary', href: ways.oidc.login_url}, 'Sign in with ' + ways.oidc.provider))
    : null;

  const token = h('input', {
    id: 'signin-token', type: 'password', name: 'token', required: true,
    autocomplete: 'current-password', spellcheck: 'false', autocapitalize: 'off',
  });
  // Present from the start (empty and hidden) so that screen readers
  // announce it when the text arrives (role=alert).
  const error = h('p', {id: 'signin-error', class: 'error-text', role: 'alert', hidden: true});
  addDescribedBy(token, 'signin-error');
  const submit = h('button', {id: 'signin-submit', type: 'submit', class: 'btn btn-primary'}, 'Sign in');

  const showError = (text) => {
    error.textContent = text;
    error.hidden = !text;
    if (text) token.setAttribute('aria-invalid', 'true');
    else token.removeAttribute('aria-invalid');
  };
  token.addEventListener('input', () => showError(''));

  const form = h('form', {class: 'card signin-card', novalidate: true, on: {submit: onSubmit}},
    h('h1', null, 'Sign in'),
    ctx.flash ? h('p', {class: 'notice', role: 'status'}, ctx.flash) : null,
    provider,
    ways.token ? h('div', {class: 'field'},
      h('label', {for: 'signin-token'}, provider ? 'Or with an admin token' : 'Admin token'),
      token,
      error) : null,
    ways.token ? h('div', {class: 'actions'}, submit) : null);

  async function onSubmit(ev) {
    ev.preventDefault();
    const value = token.value.trim();
    if (!value) {
      showError('Enter your admin token.');
      token.focus();
      return;
    }
    showError('');
    submit.disabled = true;
    submit.textContent = 'Signing in…';
    try {
      // No CSRF header yet: there is no session. A 401 here is a bad token,
      // not an ended session, so the global 401 handling stays out of it.
      const session = await api('POST', '/console/api/session', {token: value}, {signal, handle401: false});
      ctx.signedIn(session);
    } catch (err) {
      if (err.name === 'AbortError') return;
      showError(err.status === 401 && !err.message ? 'That token was not accepted.' : err.message);
      submit.disabled = false;
      submit.textContent = 'Sign in';
      token.focus();
      token.select();
    }
  }

  add(root, h('div', {class: 'signin-wrap'}, form));
  if (ways.token) token.focus();
  else document.getElementById('signin-oidc')?.focus();
}
