// What an admin panel does with the types openapi-typescript generates from
// GET /openapi.json (./openapi.d.ts, written by the test): build a submit,
// read the broadcast object, and show a 400's error. TestTypeScriptTypes
// compiles it with tsc --strict; a type the document stops describing, or
// describes so that strict TypeScript refuses it, fails that test.
import type { components, operations, paths } from "./openapi";

export type Broadcast = components["schemas"]["Broadcast"];
export type APIError = components["schemas"]["Error"];

type Submit = paths["/push/broadcast"]["post"];
export type SubmitBody = NonNullable<Submit["requestBody"]>["content"]["application/json"];
type SubmitAnswers = operations["createBroadcast"]["responses"];

// A paced broadcast to two users, as the Go client's test sends it.
export const submit: SubmitBody = {
  audience: { user_ids: [1, 2] },
  title: "Hello",
  body: "From the generated types",
  deliver_over: "10m",
  wait: false,
};

// The 202's body is the broadcast object; so is GET /push/broadcasts/{id}'s.
export const accepted = (answer: SubmitAnswers[202]["content"]["application/json"]): Broadcast => answer;
export const read = (
  answer: operations["getBroadcast"]["responses"][200]["content"]["application/json"],
): Broadcast => answer;

// The console's progress line: every counter of the broadcast object.
export function progress(b: Broadcast): string {
  const done = b.succeeded + b.failed + b.canceled + b.capped;
  const errors = Object.entries(b.errors)
    .map(([code, n]) => `${code}=${n}`)
    .join(" ");
  const finished = b.finished_at === null ? "running" : `finished ${b.finished_at}`;
  return `#${b.id} ${b.app} ${b.status} (${b.class}): ${done} of ${b.targeted}, ${finished} ${errors}`;
}

// A 400 from the submit is the error object: its code, and the field at fault
// when there is one.
export function explain(answer: SubmitAnswers[400]["content"]["application/json"]): string {
  const e: APIError = answer;
  return e.error.field === undefined ? `${e.error.code}: ${e.error.message}` : `${e.error.field}: ${e.error.code}`;
}
