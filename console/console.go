// Package console is the admin console's front end: static HTML, CSS and
// JavaScript modules, embedded in the binary so `pushfan serve` serves it
// with no build step and no network. The page calls the same HTTP API as
// any client (package server), signed in with a session cookie.
package console

import (
	"embed"
	"io/fs"
)

//go:embed assets
var assets embed.FS

// Assets returns the console's files, rooted at the assets folder
// (index.html at the top).
func Assets() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // "assets" is embedded above: cannot fail
	}
	return sub
}
