// Package openapi holds pushfan's OpenAPI 3 document, maintained by hand
// as JSON next to the handlers and embedded, so that the binary serves
// exactly the document the tests validate against (no build step, no
// generator to drift from).
//
// It is its own package so the test stack can load the contract without
// importing the server.
package openapi

import _ "embed"

// document is embedded as a string, which nothing can modify.
//
//go:embed openapi.json
var document string

// Document returns a copy of the OpenAPI document (JSON).
func Document() []byte { return []byte(document) }
