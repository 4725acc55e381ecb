// Package genclient is the Go client that oapi-codegen, the most used Go
// generator, makes of the API's OpenAPI document
// (server/openapi/openapi.json, served at GET /openapi.json). It is
// committed, so `go build ./...` and the linters compile it, and nothing
// in pushfan imports it: it is there to prove that the contract works with
// the generators API users run. Its tests check that:
//   - the committed client is what the pinned generator makes of today's
//     document (TestGeneratedClientIsCurrent);
//   - a broadcast goes end to end through it against an in-process stack:
//     submit, read, cancel, and a 400 decoded into the error type
//     (TestGeneratedClientDrivesABroadcast);
//   - the TypeScript types openapi-typescript makes of the document compile
//     under tsc --strict with a small usage file (TestTypeScriptTypes,
//     testdata/ts: both tools pinned in its package-lock.json).
//
// Regenerate it after changing the document, and commit the result:
//
//	go generate ./internal/testsupport/genclient/
package genclient

// The one place the generator's version is pinned: the currency test runs
// this line.
//
//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml -o client.gen.go ../../../server/openapi/openapi.json
