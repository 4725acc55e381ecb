package main

// The binary carries its own CA roots and time zones, so that it reaches
// real FCM (TLS to Google) and resolves users' IANA zones for local-time
// delivery on a host with neither: the image is FROM scratch, with no
// /etc/ssl and no /usr/share/zoneinfo. Both are fallbacks only: a system
// CA bundle or zoneinfo, when present, is used first (Go's rules).
import (
	_ "time/tzdata" // ~450 kB: zones for time.LoadLocation without /usr/share/zoneinfo

	_ "golang.org/x/crypto/x509roots/fallback" // Mozilla's roots for crypto/x509 without a system bundle
)
