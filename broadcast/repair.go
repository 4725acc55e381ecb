package broadcast

import (
	"context"
	"time"
)

// DefaultRepairInterval is how often an instance looks for stranded
// broadcasts (Options.RepairInterval).
const DefaultRepairInterval = 10 * time.Second

// repairBatch bounds the broadcasts one pass repairs; the next pass takes
// the rest.
const repairBatch = 100

// repair is the self-repair: every RepairInterval, on one instance at a
// time (a MySQL named lock), it finishes the broadcasts whose chunks are
// all done while their open_chunks counter keeps them open (lease.Store.
// Stranded, Repair). A broadcast whose chunks are all done is finished,
// whatever a counter says: an older release running beside this one ends
// chunks without the counter it does not know (docs/operations.md,
// "Upgrades").
func (s *Service) repair() {
	t := time.NewTicker(s.opt.RepairInterval)
	defer t.Stop()
	for {
		select {
		case <-s.claiming.Done():
			return
		case <-t.C:
		}
		if err := s.repairStranded(); err != nil && s.claiming.Err() == nil {
			s.log.Warn("repairing stranded broadcasts failed; the next pass retries", "err", err)
		}
	}
}

// repairStranded is one pass of the repair.
func (s *Service) repairStranded() error {
	ctx, cancel := context.WithTimeout(s.claiming, s.opt.DBTimeout)
	release, ok, err := s.store.TryLock(ctx, "repair")
	cancel()
	if err != nil || !ok {
		return err // another instance runs the pass
	}
	defer release()
	ctx, cancel = context.WithTimeout(s.claiming, s.opt.DBTimeout)
	ids, err := s.leases.Stranded(ctx, repairBatch)
	cancel()
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := s.runner.Repair(s.claiming, id); err != nil {
			return err
		}
	}
	return nil
}
