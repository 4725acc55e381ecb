package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FrequencyCap is one cap: at most Max sends to a user per window. The
// window is the user's local calendar day (Day), or a rolling Per.
type FrequencyCap struct {
	Max int
	Day bool
	Per time.Duration
	// App, when set, keeps the cap's count apart from other apps' (the
	// ledger's key; caps.Set.ForApp): never parsed or written.
	App string
}

// String is the cap as written in PUSHFAN_FREQUENCY_CAP: "3/day", "2/6h0m0s".
func (c FrequencyCap) String() string {
	if c.Day {
		return strconv.Itoa(c.Max) + "/day"
	}
	return strconv.Itoa(c.Max) + "/" + c.Per.String()
}

// Bounds of a cap: more slots than this per user would make every
// reservation read that many rows per user; a window under a minute is a
// rate limit, not a cap, and one over 31 days is kept for too long.
const (
	MaxFrequencyCapCount = 100
	minFrequencyCapPer   = time.Minute
	maxFrequencyCapPer   = 31 * 24 * time.Hour
)

// ParseFrequencyCaps reads "N/day" or "N/<Go duration>" caps separated by
// commas ("1/2h,3/day"); "" is no cap. Caps are returned in the order
// written; two caps with the same window are refused (the smaller one
// alone says the same).
func ParseFrequencyCaps(s string) ([]FrequencyCap, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []FrequencyCap
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		n, per, ok := strings.Cut(part, "/")
		if !ok {
			return nil, fmt.Errorf("%q is not count/window, e.g. 3/day or 2/6h", part)
		}
		max, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil || max < 1 || max > MaxFrequencyCapCount {
			return nil, fmt.Errorf("%q: the count must be a whole number from 1 to %d", part, MaxFrequencyCapCount)
		}
		c := FrequencyCap{Max: max}
		if per = strings.TrimSpace(per); per == "day" {
			c.Day = true
		} else {
			d, err := time.ParseDuration(per)
			if err != nil {
				return nil, fmt.Errorf("%q: the window must be day or a duration such as 6h: %w", part, err)
			}
			if d < minFrequencyCapPer || d > maxFrequencyCapPer {
				return nil, fmt.Errorf("%q: the window must be between %v and %v", part, minFrequencyCapPer, maxFrequencyCapPer)
			}
			c.Per = d
		}
		key := c.String()[len(strconv.Itoa(c.Max)):]
		if seen[key] {
			return nil, fmt.Errorf("%q: two caps over the same window %s", s, key[1:])
		}
		seen[key] = true
		out = append(out, c)
	}
	return out, nil
}

// FormatFrequencyCaps writes caps back in the canonical form
// ParseFrequencyCaps reads.
func FormatFrequencyCaps(caps []FrequencyCap) string {
	parts := make([]string, len(caps))
	for i, c := range caps {
		parts[i] = c.String()
	}
	return strings.Join(parts, ",")
}

// validateFrequencyCaps checks the default cap and the named ones, and
// that every job's cap names one (validateAudiences checks the
// audiences').
func validateFrequencyCaps(c *Config) []error {
	var errs []error
	if _, err := ParseFrequencyCaps(c.Engine.FrequencyCap); err != nil {
		errs = append(errs, fmt.Errorf("PUSHFAN_FREQUENCY_CAP: %w", err))
	}
	for name, spec := range c.FrequencyCaps {
		if name == "" || name == FrequencyCapOff || name == FrequencyCapDefault {
			errs = append(errs, fmt.Errorf("frequency_caps: %q is reserved (off and default name no cap and the deployment's)", name))
		}
		if _, err := ParseFrequencyCaps(spec); err != nil {
			errs = append(errs, fmt.Errorf("frequency_caps.%s: %w", name, err))
		}
	}
	known := func(name string) bool {
		_, ok := c.FrequencyCaps[name]
		return name == "" || name == FrequencyCapOff || name == FrequencyCapDefault || ok
	}
	for _, j := range c.Jobs {
		if !known(j.FrequencyCap) {
			errs = append(errs, fmt.Errorf("jobs.%s.frequency_cap: %q is not in frequency_caps (nor off or default)", j.Name, j.FrequencyCap))
		}
	}
	return errs
}

// Names an audience's or job's frequency_cap may take besides those of
// frequency_caps.
const (
	FrequencyCapOff     = "off"     // no cap
	FrequencyCapDefault = "default" // PUSHFAN_FREQUENCY_CAP (also when unset)
)

// NamedFrequencyCap is the spec of cap name: "" for off, the default for
// "" or default.
func (c *Config) NamedFrequencyCap(name string) (string, bool) {
	switch name {
	case "", FrequencyCapDefault:
		return c.Engine.FrequencyCap, true
	case FrequencyCapOff:
		return "", true
	}
	spec, ok := c.FrequencyCaps[name]
	return spec, ok
}
