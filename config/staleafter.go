package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The bounds of PUSHFAN_STALE_AFTER. Below a day, a phone left in a
// drawer over a weekend would lose its pushes; past 270 days FCM has
// expired an Android token itself, so a longer setting would leave out
// nothing FCM still delivers to.
const (
	MinStaleAfter = 24 * time.Hour
	MaxStaleAfter = 270 * 24 * time.Hour
)

// days parses a duration that may also be written in whole days ("30d"),
// the unit token freshness is thought in; Go's durations ("720h") too.
func days(p *time.Duration) func(string) error {
	return func(s string) error {
		if n, ok := strings.CutSuffix(s, "d"); ok {
			v, err := strconv.Atoi(n)
			if err != nil || v < 0 {
				return fmt.Errorf("%q is not a duration (use e.g. 30d or 720h)", s)
			}
			*p = time.Duration(v) * 24 * time.Hour
			return nil
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration (use e.g. 30d or 720h)", s)
		}
		*p = d
		return nil
	}
}

// staleAfterRule: 0 (off), or a day to 270 days.
func staleAfterRule(p *time.Duration) rule {
	return rule{
		text: fmt.Sprintf("0 (off), or %s to %s (1 to 270 days)", shortDuration(MinStaleAfter), shortDuration(MaxStaleAfter)),
		check: func() string {
			if *p != 0 && (*p < MinStaleAfter || *p > MaxStaleAfter) {
				return fmt.Sprintf("must be 0 (off) or between 1 day (%s) and 270 days (%s), got %v", shortDuration(MinStaleAfter), shortDuration(MaxStaleAfter), *p)
			}
			return ""
		},
	}
}
