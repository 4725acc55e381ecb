// Drafts: the compose form as the operator left it, kept in localStorage
// per app (so a reload, or a browser crash, does not lose a message) and
// cleared once it is sent. A draft is the form's own snapshot (compose.js
// snapshot/restore); this module only keeps it.

const PREFIX = 'pushfan.draft.';

function keyOf(app) {
  return PREFIX + (app || '-');
}

// loadDraft is the draft kept for app, or null.
export function loadDraft(app) {
  try {
    const raw = localStorage.getItem(keyOf(app));
    if (!raw) return null;
    const d = JSON.parse(raw);
    return d && typeof d === 'object' ? d : null;
  } catch {
    // storage refused, or a draft a newer console wrote: none to restore
    return null;
  }
}

// saveDraft keeps d for app; an empty draft (nothing typed) removes it.
export function saveDraft(app, d, empty) {
  try {
    if (empty) localStorage.removeItem(keyOf(app));
    else localStorage.setItem(keyOf(app), JSON.stringify({...d, saved_at: new Date().toISOString()}));
  } catch {
    // storage full or refused: the form still works, without a draft
  }
}

export function clearDraft(app) {
  try {
    localStorage.removeItem(keyOf(app));
  } catch {
    // nothing kept
  }
}
