// pushfan.js: report what happened to a push (received, opened, clicked,
// dismissed) back to pushfan, from a web page or a service worker.
//
// Every message pushfan sends carries data.pushfan, a signed event token.
// Post it back with what happened; no credentials are needed, and nothing
// else about the device or the user is sent.
//
//   import { report, tokenOf } from "https://push.example.com/v1/sdk/pushfan.js";
//   await report("https://push.example.com", [{ token: tokenOf(data), type: "opened" }]);
//
// The answer is pushfan's: {accepted, duplicates, refused: [{index, code}]}.
// A replay is a duplicate, so retrying a post that may have failed is safe.

/** The event types pushfan counts. */
export const TYPES = Object.freeze(["received", "opened", "clicked", "dismissed"]);

/** At most this many events go in one post. */
export const MAX_EVENTS = 100;

/**
 * tokenOf returns the event token of a push's data (the FCM message's data
 * object, or a notification's data that kept it), or "" when it has none.
 */
export function tokenOf(data) {
  if (!data || typeof data !== "object") return "";
  if (typeof data.pushfan === "string") return data.pushfan;
  if (data.data && typeof data.data.pushfan === "string") return data.data.pushfan; // FCM's payload shape
  if (data.FCM_MSG && data.FCM_MSG.data) return tokenOf(data.FCM_MSG.data); // the Firebase JS SDK's notification data
  return "";
}

/**
 * report posts events ({token, type, at?}) to the pushfan at base (its
 * public URL), in posts of at most MAX_EVENTS, and returns the answers
 * summed: {accepted, duplicates, refused} with refused indexes into events.
 * Events without a token are left out. It throws on a network error or an
 * answer other than 200 (the events are then safe to post again).
 */
export async function report(base, events, { fetchFn = globalThis.fetch } = {}) {
  const out = { accepted: 0, duplicates: 0, refused: [] };
  const url = String(base).replace(/\/+$/, "") + "/v1/events";
  const all = events
    .map((e, index) => ({ e, index }))
    .filter(({ e }) => e && e.token && TYPES.includes(e.type));
  for (let i = 0; i < all.length; i += MAX_EVENTS) {
    const part = all.slice(i, i + MAX_EVENTS);
    const body = JSON.stringify({
      events: part.map(({ e }) => (e.at ? { token: e.token, type: e.type, at: toRFC3339(e.at) } : { token: e.token, type: e.type })),
    });
    // keepalive: a report made as the page closes still goes out.
    const resp = await fetchFn(url, { method: "POST", headers: { "Content-Type": "application/json" }, body, keepalive: body.length < 60000 });
    if (resp.status !== 200) {
      throw new Error(`pushfan: POST /v1/events answered ${resp.status}`);
    }
    const a = await resp.json();
    out.accepted += a.accepted;
    out.duplicates += a.duplicates;
    for (const r of a.refused || []) out.refused.push({ index: part[r.index].index, code: r.code });
  }
  return out;
}

function toRFC3339(at) {
  return at instanceof Date ? at.toISOString() : String(at);
}
