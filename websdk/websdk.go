// Package websdk is the web SDK apps use to report engagement events: an
// ES module (pushfan.js) that pushfan serves at GET /v1/sdk/pushfan.js, for
// a page or a service worker to import from the pushfan it reports to.
package websdk

import _ "embed"

// Module is pushfan.js.
//
//go:embed pushfan.js
var Module []byte
