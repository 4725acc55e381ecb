// The API's enum values in the operator's words: a broadcast's class, a
// device's platform, a target's outcome, an audit action, a webhook
// event. Each value the catalog knows (enum.<kind>.<value>) is shown in
// words; one it does not (a newer server's) as the server wrote it. The
// raw value stays on hover (title) and in data-value, for the engineer
// and the tests.

import {h} from './dom.js';
import {tOr} from './i18n.js';

// enumName is the value's words, or the value itself. A platform is an
// app's own column (iOS, ANDROID, web): matched without regard to case,
// as the server counts it (model.PlatformOf).
export function enumName(kind, value) {
  const key = kind === 'platform' ? String(value).toLowerCase() : value;
  return tOr(`enum.${kind}.${key}`, value);
}

// enumEl is the value's words in a <span> (or tag), the raw value on hover.
export function enumEl(kind, value, attrs, tag = 'span') {
  return h(tag, {...attrs, title: value, 'data-value': value}, enumName(kind, value));
}

// The audit actions (package audit's), for the activity page's filter.
export const ACTIONS = ['broadcast.create', 'broadcast.cancel', 'broadcast.release', 'broadcast.release.refused',
  'broadcast.resend', 'broadcast.edit', 'testsend', 'segment.create', 'segment.update', 'segment.delete',
  'consent.update', 'audiences.reload', 'webhook.redeliver', 'webhook.enable', 'job.fire', 'job.run', 'job.pause',
  'job.resume', 'key.create', 'key.revoke', 'template.create', 'template.update', 'template.delete', 'signin',
  'signin.failed', 'signout'];
