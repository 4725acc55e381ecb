package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"pushfan/repository"
)

// versionInfo is what `pushfan version` prints, read from the build
// information the go command stamps into every binary built from a VCS
// checkout (-buildvcs, on by default): no -ldflags to keep in step with a
// Makefile, and a binary built by plain `go build` says the same.
type versionInfo struct {
	Module   string // the main module's version: (devel) for a local build
	Revision string // vcs.revision, with "-dirty" when vcs.modified
	// Time is vcs.time, the commit's time (RFC 3339): the build time a
	// reproducible build can carry, the same on every rebuild of it.
	Time string
	Go   string
}

func readVersion() versionInfo {
	v := versionInfo{Module: "unknown", Revision: "unknown", Time: "unknown", Go: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if info.Main.Version != "" {
		v.Module = info.Main.Version
	}
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && v.Revision != "unknown" {
		v.Revision += "-dirty"
	}
	return v
}

func printVersion(w io.Writer) error {
	v := readVersion()
	// schema: the database schema the build was made for (its highest
	// migration; docs/operations.md, "Releases side by side").
	_, err := fmt.Fprintf(w, "pushfan %s\nrevision %s\ntime     %s\nschema   %d\ngo       %s\n", v.Module, v.Revision, v.Time, repository.SchemaVersion(), v.Go)
	if err != nil {
		return fmt.Errorf("writing the version: %w", err)
	}
	return nil
}
