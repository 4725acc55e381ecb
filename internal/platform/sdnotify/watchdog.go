package sdnotify

import (
	"context"
	"time"
)

// WatchdogInterval is how often the watchdog pings: half of WATCHDOG_USEC,
// as sd_watchdog_enabled(3) advises, so that one late ping is not a
// restart. 0 when there is no watchdog.
func (n *Notifier) WatchdogInterval() time.Duration { return n.watchdog / 2 }

// StartWatchdog pings WATCHDOG=1 every WatchdogInterval until StopWatchdog,
// when alive answers nil within the interval: a process whose HTTP server
// no longer answers stops pinging and is restarted by systemd. alive nil
// pings unconditionally. Without a watchdog it does nothing; a second
// call while it runs does nothing either.
func (n *Notifier) StartWatchdog(ctx context.Context, alive func(context.Context) error) {
	every := n.WatchdogInterval()
	if n.addr == nil || every <= 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stop != nil {
		return
	}
	ctx, n.stop = context.WithCancel(ctx)
	n.done = make(chan struct{})
	go n.ping(ctx, every, alive, n.done)
}

// StopWatchdog stops the pings and returns once the pinging goroutine has
// ended. It is safe to call twice, and without a StartWatchdog.
func (n *Notifier) StopWatchdog() {
	n.mu.Lock()
	stop, done := n.stop, n.done
	n.stop, n.done = nil, nil
	n.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	<-done
}

func (n *Notifier) ping(ctx context.Context, every time.Duration, alive func(context.Context) error, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n.pingOnce(ctx, every, alive)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pingOnce pings if alive says so; it logs a skipped or lost ping, which
// systemd will act on if the next ones go the same way.
func (n *Notifier) pingOnce(ctx context.Context, every time.Duration, alive func(context.Context) error) {
	if alive != nil {
		cctx, cancel := context.WithTimeout(ctx, every)
		err := alive(cctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				n.log.WarnContext(ctx, "watchdog: not pinging systemd: this instance does not answer", "err", err)
			}
			return
		}
	}
	if err := n.send("WATCHDOG=1"); err != nil {
		n.log.WarnContext(ctx, "watchdog: the ping did not reach systemd", "err", err)
	}
}
