package webhook

import "time"

// SetLeaseMargin sets how long an attempt's claim outlasts its timeout
// (leaseMargin in production): a short one lets a test see a batch
// outlive its claims in seconds rather than minutes. Call before Start.
func (d *Deliverer) SetLeaseMargin(m time.Duration) { d.margin = m }
