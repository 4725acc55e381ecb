package quota

import "context"

// SetTestHook installs fn, called by the heartbeat loop at each stage of a
// beat (see Coordinator.hook). Call it before Start.
func (c *Coordinator) SetTestHook(fn func(ctx context.Context, stage string)) { c.hook = fn }
