package config

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Bounds of PUSHFAN_WEBHOOK_RETRY_SCHEDULE: a step longer than the day an
// event is retried for would never come, and past 20 steps a schedule is
// no longer read at a glance (the last step repeats: a long tail needs no
// more).
const (
	maxRetrySteps = 20
	maxRetryStep  = 24 * time.Hour
)

// ParseRetrySchedule reads a webhook retry schedule: Go durations
// separated by commas ("5s,30s,2m"), the waits after an event's 1st, 2nd,
// ... failed attempt, the last one repeating.
func ParseRetrySchedule(s string) ([]time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("is empty: list at least one duration, e.g. 5s,30s,2m")
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxRetrySteps {
		return nil, fmt.Errorf("has %d steps, more than %d (the last step repeats: a long tail needs no more)", len(parts), maxRetrySteps)
	}
	steps := make([]time.Duration, len(parts))
	for i, part := range parts {
		part = strings.TrimSpace(part)
		d, err := time.ParseDuration(part)
		switch {
		case err != nil:
			return nil, fmt.Errorf("step %d, %q, is not a duration such as 30s or 2m: %w", i+1, part, err)
		case d <= 0:
			return nil, fmt.Errorf("step %d, %q, must be a positive duration", i+1, part)
		case d > maxRetryStep:
			return nil, fmt.Errorf("step %d, %q, must be at most %s (an event is retried for a day)", i+1, part, shortDuration(maxRetryStep))
		}
		steps[i] = d
	}
	return steps, nil
}
