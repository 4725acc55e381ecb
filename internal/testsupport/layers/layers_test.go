// Package layers holds one test: the map of which pushfan package may
// import which. It keeps docs/architecture.md's map true: storage and the
// engine never import the API, the engine knows nothing of HTTP or FCM,
// and a new package must say where it sits before it lands.
package layers

import (
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// allowed lists, for every package (by its path below the module), the
// pushfan packages its non-test files may import.
var allowed = map[string][]string{
	// The domain's plain types and the shared helpers: no pushfan imports.
	"model":                       nil,
	"internal/platform/clock":     nil,
	"internal/platform/lifecycle": nil,
	"internal/platform/logging":   nil,
	"internal/platform/sqldb":     nil,
	"internal/platform/sdnotify":  nil,                                  // systemd's notify protocol: READY, STOPPING, the watchdog
	"audit":                       {"internal/platform/sqldb", "model"}, // the audit trail: the action table, the request's pending entry, its storage
	"internal/devtools/apiclient": nil,
	"audience":                    {"config"}, // named audiences: SQL over an injected pool, compiled from the config's definitions
	"fcmemu":                      nil,        // the emulator knows nothing of pushfan
	"websdk":                      nil,        // the web SDK's ES module, embedded
	// The engine: targets in, classified outcomes out. No HTTP, no FCM.
	"fanout": {"internal/platform/clock", "internal/platform/lifecycle"},
	// The FCM client implements the engine's Sender; it sends over its
	// transport: the HTTP/1.1 and HTTP/2 clients, their pools and dialing,
	// which know nothing of FCM (or of anything else of pushfan's).
	"fcm":           {"fanout", "fcm/transport"},
	"fcm/transport": nil,
	// Schedules and their scheduler, behind a Submitter.
	"cron": {"config", "internal/platform/lifecycle"},
	// The chunk protocol and the storage.
	"lease":         {"audit", "internal/platform/sqldb", "lease/codec", "lease/outcome", "lease/sends", "model", "repository"},
	"lease/sends":   {"internal/platform/sqldb", "model"},                                                                                    // a checkpoint's sends by variant and platform, folded into its statements
	"lease/outcome": {"internal/platform/sqldb"},                                                                                             // every target's kept outcome: its kinds, the compact blob, the bounded look-up
	"lease/codec":   nil,                                                                                                                     // the compact encodings of a chunk row's columns: done ranges, target lists
	"repository":    {"audit", "model", "internal/platform/sqldb", "internal/platform/clock", "internal/platform/logging", "segment/filter"}, // reads and inserts by entity; no transitions
	"retention":     {"internal/platform/clock", "internal/platform/lifecycle"},
	"campaigns":     {"internal/platform/sqldb", "lease/sends", "model"},                 // the broadcasts as campaigns: trends and breakdowns, read-only
	"outcomes":      {"lease/codec", "lease/outcome", "model"},                           // every target's kept outcome, read: a user's deliveries, a broadcast's export
	"caps":          {"config", "internal/platform/sqldb", "model"},                      // the frequency-cap ledger: slots reserved per page, settled in the checkpoint
	"consent":       {"audit", "internal/platform/sqldb", "model"},                       // the bundled consent table: answers with their history, the consents due
	"apikey":        {"internal/platform/sqldb", "model"},                                // the API keys kept in the database: create, list, revoke, the cached check
	"msgtemplate":   {"audience", "audit", "internal/platform/sqldb"},                    // the message templates the console saves and reuses
	"engagement":    {"internal/platform/lifecycle", "model"},                            // event tokens and their group-committed ingestion
	"webhook":       {"audit", "internal/platform/lifecycle", "internal/platform/sqldb"}, // Standard Webhooks: the outbox's writer, its deliverer
	"metrics":       nil,                                                                 // Prometheus collectors; fanout.Metrics takes plain values
	"quota":         {"internal/platform/lifecycle", "internal/platform/sqldb"},          // the cluster's rate budget, over MySQL, behind quota.Limiter
	// The message: rules, platform overrides, localized variants and
	// templates, rendered per target.
	"broadcast/message": {"audience", "fanout", "model"},
	// What one instance's planner and runs share: its lease name, clock,
	// lifecycle and database retries, and its apps (each an engine and the
	// Store of its tokens).
	"broadcast/instance": {"fanout", "internal/platform/lifecycle", "lease", "model", "repository"},
	// Planning: the audience into chunks, local time and quiet hours.
	"broadcast/plan": {"audience", "broadcast/instance", "internal/platform/clock", "lease", "lease/outcome", "model", "repository"},
	// Running: dispatch, chunk runs and checkpoints, the store gate, the
	// pacer, finishing.
	"broadcast/run": {"audience", "broadcast/instance", "caps", "broadcast/message", "engagement", "webhook", "fanout", "internal/platform/clock", "internal/platform/logging", "lease", "lease/sends", "model", "repository"},
	// The request rules: Spec, the request's shape, checked into a Request
	// (a cron job's fire too); the frequency cap a request gets. plan: only
	// its wall-clock vocabulary (send_at_local's layout, a time of day).
	"broadcast/rules": {"audience", "broadcast/instance", "broadcast/message", "broadcast/plan", "caps", "cron", "model", "repository"},
	// The reads: a broadcast, lists, totals, failures, engagement, audience
	// previews, waits, with their caches; run: only its expected finish.
	"broadcast/reads": {"audience", "broadcast/instance", "broadcast/message", "broadcast/plan", "broadcast/rules", "broadcast/run", "internal/platform/lifecycle", "lease", "model", "repository"},
	// The write side: submit, cancel, held and release, resend, job fires;
	// it wires plan and run. fcm: only its error-code vocabulary (which
	// codes a resend may cover).
	"broadcast": {"audience", "broadcast/instance", "broadcast/reads", "broadcast/rules", "caps", "broadcast/message", "broadcast/plan", "broadcast/run", "cron", "engagement", "webhook", "fanout", "fcm", "lease", "model", "repository", "internal/platform/lifecycle", "internal/platform/logging"},
	// Test sends: a message sent now to a few tokens, checked by the
	// request rules, answered per token; beside the write side, which it
	// does not call.
	"broadcast/testsend": {"broadcast/instance", "broadcast/message", "broadcast/reads", "broadcast/rules", "engagement", "fanout", "internal/platform/lifecycle", "model", "repository"},
	"config":             {"model"}, // plain settings; the domain compiles audiences and jobs
	"segment/filter":     nil,       // segments' filter language: checked, compiled to bound SQL, matched in Go
	// The saved segments: writes checked against the schema's fields,
	// versions, previews.
	"segment": {"model", "repository", "segment/filter"},
	// The HTTP API: decode, call the domain, render. It reaches the domain
	// through interfaces of its own (broadcast, reads, rules, testsend for
	// their types only: the request, its field errors, a preview, a test
	// report; consent and segment for their refusals) and reads a server.Config that
	// package app builds, never config's: a fake domain can stand in for
	// the real one.
	"server":         {"apikey", "audience", "audit", "broadcast", "broadcast/reads", "broadcast/rules", "broadcast/testsend", "consent", "console", "cron", "engagement", "fcm", "model", "internal/platform/logging", "segment", "server/consents", "server/campaigns", "server/cluster", "server/deliveries", "server/keys", "server/live", "server/openapi", "server/proxies", "server/ratelimit", "server/segments", "server/sso", "server/templates", "server/apierror", "server/events", "server/jobs", "server/schedule", "server/view", "server/webhooks", "webhook", "websdk", "server/audittrail"},
	"server/openapi": nil, // the API's OpenAPI document, embedded; the test stack validates against it
	// The API's own parts, each a concept the handlers use and none of
	// them HTTP routing: the contract's objects as encoded (the broadcast
	// object, its engagement funnel, stats and failure pages), the
	// live-watch hub and its server-sent event streams (it takes the
	// reads and the renderer as functions, so it knows no domain), the
	// per-key token buckets the budgets are made of, the trusted
	// reverse proxies (client address, TLS behind them), and the routes
	// of the categories and the bundled consent table, and of the saved
	// segments (the server registers them in its /push group and passes them its strict
	// decoding, the caller's name and its clock).
	"server/view":       {"model"},
	"server/live":       {"model", "server/view"},
	"server/ratelimit":  nil,
	"server/proxies":    nil,
	"server/consents":   {"consent", "model"},
	"server/segments":   {"model", "segment", "segment/filter"},
	"server/keys":       {"apikey", "model"},
	"server/templates":  {"msgtemplate", "server/apierror"},
	"server/audittrail": {"audit", "internal/platform/logging", "model"},  // the audit trail's routes: the list and its NDJSON export
	"server/deliveries": {"lease/outcome", "outcomes", "server/apierror"}, // a user's deliveries: GET /push/users/{id}/deliveries
	"server/campaigns":  {"campaigns", "server/apierror"},                 // the campaign analytics: GET /push/campaigns and its breakdown
	"server/cluster":    {"model", "server/apierror"},                     // the live cluster view: GET /push/cluster
	// The API's error (status, code, message, field), which server and
	// its route packages return, and the webhook endpoints' routes.
	"server/apierror": nil,
	"server/webhooks": {"server/apierror", "webhook"},
	// The apps' public routes under /v1: engagement events, the click
	// redirect, the web SDK.
	"server/events": {"engagement", "server/apierror", "server/ratelimit", "websdk"},
	// The cron jobs' routes: the list and the external trigger.
	"server/jobs":     {"audit", "cron", "model", "server/apierror"},
	"server/schedule": {"broadcast/rules", "model", "server/apierror"},
	// The console's OpenID Connect relying party (go-oidc, x/oauth2): the
	// provider's redirect, the code exchange, the ID token's checks and
	// the groups' roles; the server keeps the sign-ins and the sessions.
	"server/sso": {"model"},
	"console":    nil, // the admin console's files, embedded; it talks to the server over HTTP only
	// Wiring and the binaries.
	"cmd/pushfan/app": {"apikey", "audience", "audit", "broadcast", "broadcast/plan", "broadcast/reads", "broadcast/rules", "broadcast/run", "broadcast/testsend", "campaigns", "caps", "config", "consent", "cron", "engagement", "fanout", "fcm", "internal/platform/lifecycle", "lease", "metrics", "model", "msgtemplate", "outcomes", "quota", "repository", "retention", "segment", "server", "server/sso", "server/templates", "webhook"},
	"cmd/pushfan":     {"config", "fcmemu", "cmd/pushfan/app", "internal/devtools/demo", "internal/platform/logging", "internal/platform/sdnotify", "internal/platform/sqldb", "model", "repository"},
	// config: the defaults a latency sweep runs at; engagement: events
	// signed as the sends sign them; the retention phase drives a
	// broadcast's checkpoints (lease) and a retention pass (retention,
	// repository) directly, to time the one beside the other.
	"cmd/pushfan-bench": {"config", "engagement", "internal/devtools/apiclient", "internal/platform/sqldb", "lease", "model", "repository", "retention"},
	"cmd/pushfan-load":  {"internal/devtools/apiclient"},
	// Demo data and test support.
	"internal/devtools/demo":               {"internal/platform/sqldb"},
	"internal/testsupport/testdb":          {"internal/platform/sqldb", "repository"},
	"internal/testsupport/segmentgen":      {"segment/filter"},
	"internal/testsupport/teststack":       {"broadcast", "config", "fcmemu", "internal/devtools/apiclient", "cmd/pushfan/app", "internal/devtools/demo", "internal/platform/logging", "internal/platform/sqldb", "internal/testsupport/testdb", "lease", "repository", "server", "server/openapi"},
	"internal/testsupport/layers":          nil,
	"internal/testsupport/doccheck":        nil, // the docs' own tests: README length, links, marked commands
	"internal/testsupport/chaos":           nil, // the chaos soak: only its package doc is not a test file
	"internal/testsupport/oidcprovider":    nil, // starts a real OIDC provider process (its main below) for the sign-in tests
	"internal/testsupport/oidcprovider/op": nil, // the provider: zitadel/oidc's OP with users in groups, key rotation and faults to inject
	"internal/testsupport/genclient":       nil, // the Go client oapi-codegen generates from the OpenAPI document; only its tests use it
}

// layer ranks every package, from the bottom (0): a package may import
// only from layers below its own, so every arrow of the map points down
// and the layers read top to bottom: the binaries and test support, the
// wiring, the API, the write side (beside it the test sends) over its
// reads, the request rules, the planner and runs, what they share, the state owner and the message, storage and the
// services beside it, the engine and plain settings, the platform. The
// API's own parts (server/view, server/live, server/ratelimit,
// server/proxies) sit as low as their imports let them: they import no
// domain package; server/consents sits just above the consent book whose
// types it renders, server/segments just above the segments' catalog.
var layer = map[string]int{
	"model": 0, "internal/platform/clock": 0, "internal/platform/lifecycle": 0, "internal/platform/logging": 0,
	"internal/platform/sqldb": 0, "internal/platform/sdnotify": 0, "server/openapi": 0, "console": 0, "fcmemu": 0, "websdk": 0, "internal/devtools/apiclient": 0,
	"server/ratelimit": 0, "server/proxies": 0, "segment/filter": 0, "server/apierror": 0,
	"server/sso": 1, "audit": 1,
	"config": 1, "fanout": 1, "server/view": 1, "metrics": 1, "fcm/transport": 1, "lease/codec": 1, "lease/outcome": 1, "lease/sends": 1,
	"server/live": 2, "server/audittrail": 2,
	"audience": 2, "cron": 2, "engagement": 2, "webhook": 2, "fcm": 2, "quota": 2, "repository": 2, "retention": 2, "caps": 2, "consent": 2, "apikey": 2,
	"lease":                             3,
	"server/consents":                   3,
	"server/keys":                       3,
	"server/templates":                  4,
	"msgtemplate":                       3,
	"server/webhooks":                   3,
	"server/events":                     3,
	"server/jobs":                       3,
	"segment":                           3,
	"outcomes":                          2,
	"campaigns":                         2,
	"server/campaigns":                  3,
	"server/segments":                   4,
	"server/deliveries":                 3,
	"server/cluster":                    2,
	"broadcast/message":                 3,
	"broadcast/instance":                4,
	"broadcast/plan":                    5,
	"broadcast/run":                     5,
	"broadcast/rules":                   6,
	"broadcast/reads":                   7,
	"server/schedule":                   7,
	"broadcast":                         8,
	"broadcast/testsend":                8,
	"server":                            9,
	"cmd/pushfan/app":                   10,
	"internal/devtools/demo":            11,
	"internal/testsupport/testdb":       11,
	"internal/testsupport/segmentgen":   11,
	"internal/testsupport/layers":       11,
	"internal/testsupport/doccheck":     11,
	"internal/testsupport/oidcprovider": 11, "internal/testsupport/oidcprovider/op": 11,
	"cmd/pushfan": 12, "cmd/pushfan-bench": 12, "cmd/pushfan-load": 12,
	"internal/testsupport/teststack": 12,
	"internal/testsupport/chaos":     12,
	"internal/testsupport/genclient": 12,
}

// Every arrow the map allows points to a lower layer.
func TestTheMapPointsDown(t *testing.T) {
	for pkg, deps := range allowed {
		from, ok := layer[pkg]
		if !ok {
			t.Errorf("%s has no layer", pkg)
			continue
		}
		for _, dep := range deps {
			if to, ok := layer[dep]; !ok || to >= from {
				t.Errorf("%s (layer %d) may import %s (layer %d): an arrow that does not point down", pkg, from, dep, to)
			}
		}
	}
}

func TestImportsFollowTheLayers(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := readTree(root) // the limits test's walk: the same files
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for rel, files := range pkgs {
		seen[rel] = true
		want, ok := allowed[rel]
		if !ok {
			t.Errorf("package %s is not on the map: add it to allowed and layer in internal/testsupport/layers (and to the tree in docs/architecture.md)", rel)
			continue
		}
		for _, f := range files {
			for _, imp := range f.ast.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				dep, ok := strings.CutPrefix(p, "pushfan/")
				if ok && !slices.Contains(want, dep) {
					t.Errorf("%s imports pushfan/%s, which its layer does not allow (allowed: %v)", f.rel, dep, want)
				}
			}
		}
	}
	var gone []string
	for pkg := range allowed {
		if !seen[pkg] && pkg != "internal/testsupport/layers" && pkg != "internal/testsupport/doccheck" {
			gone = append(gone, pkg)
		}
	}
	sort.Strings(gone)
	if len(gone) > 0 {
		t.Errorf("packages on the map that no longer exist: %v", gone)
	}
}
