package webhook

import "time"

// SetLeaseMargin sets how long an attempt's claim outlasts its timeout
// (leaseMargin in production): a short one lets a test see a batch
// outlive its claims in seconds rather than minutes. Call before Start.
func (d *Deliverer) SetLeaseMargin(m time.Duration) { d.margin = m }

// SetClock has the summaries read the time from now: a test moves it past
// the stages and the retries' waits.
func (s *Summaries) SetClock(now func() time.Time) { s.now = now }
