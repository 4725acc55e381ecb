// Package apikey is the API keys kept in the database (issue 43;
// docs/security.md#api-keys): bearer tokens an admin creates, lists and
// revokes through the API, beside the environment's tokens (which stay
// for bootstrapping).
//
// A key is shown once, when it is created: the table keeps only the
// SHA-256 of its secret (a 256-bit random value), so a read of the
// database cannot call the API. A key has a public id (the actor id the
// broadcasts and the audit trail name), a name, a role and optionally the
// apps it may use, and may expire.
//
// Checking a key (Keys.Check) is on the path of every request that
// presents one, so it must not cost a database round trip each time: a
// key's lookup is cached for at most Options.CacheTTL (1 s), a revoke
// forgets it at once on its own instance, and every other instance sees
// the revocation when its cached lookup ages out: within 2 s, whatever the
// request rate. Concurrent checks of one key that miss the cache share
// one lookup. last_used_at is written at most once a minute per key per
// instance, never per request.
//
// Every write (create, revoke) is one sqldb.InTx transaction, and
// Options.OnWrite runs inside it, so an audit entry written there commits
// or rolls back with the change.
package apikey
