package config

import (
	"fmt"
	"strings"
	"time"
)

// validateLocalTime checks the local-time delivery settings: the default
// zone must load (a typo would silently send everyone at UTC), and the
// default quiet hours must be two different times of day.
func validateLocalTime(e Engine) []error {
	var errs []error
	if e.DefaultTimezone == "" || e.DefaultTimezone == "Local" {
		errs = append(errs, fmt.Errorf("PUSHFAN_DEFAULT_TIMEZONE: must be an IANA zone name such as UTC or Asia/Seoul, got %q", e.DefaultTimezone))
	} else if _, err := time.LoadLocation(e.DefaultTimezone); err != nil {
		errs = append(errs, fmt.Errorf("PUSHFAN_DEFAULT_TIMEZONE: %q is not a known IANA zone: %w", e.DefaultTimezone, err))
	}
	if e.QuietHours != "" {
		if _, _, err := ParseQuietHours(e.QuietHours); err != nil {
			errs = append(errs, fmt.Errorf("PUSHFAN_QUIET_HOURS: %w", err))
		}
	}
	return errs
}

// ParseQuietHours reads "HH:MM-HH:MM" (seconds allowed, HH:MM:SS) into
// its start and end.
func ParseQuietHours(s string) (start, end string, err error) {
	start, end, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return "", "", fmt.Errorf("%q is not start-end, e.g. 22:00-08:00", s)
	}
	start, end = strings.TrimSpace(start), strings.TrimSpace(end)
	var secs [2]int
	for i, v := range []string{start, end} {
		t, err := time.Parse("15:04", v)
		if err != nil {
			if t, err = time.Parse("15:04:05", v); err != nil {
				return "", "", fmt.Errorf("%q is not a time of day HH:MM in %q", v, s)
			}
		}
		secs[i] = t.Hour()*3600 + t.Minute()*60 + t.Second()
	}
	if secs[0] == secs[1] {
		return "", "", fmt.Errorf("start and end are both %s in %q", start, s)
	}
	return start, end, nil
}
