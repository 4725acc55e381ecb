package fanout

import "time"

// PausedUntil reports the current pause end (zero if never paused).
func (t *Throttle) PausedUntil() time.Time {
	if ns := t.pausedUntil.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}
