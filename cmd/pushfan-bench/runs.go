package main

import (
	"context"
	"fmt"
	"time"
)

func (b *bench) runBench(ctx context.Context, rep *report) error {
	o := b.o
	db, err := b.seeded(ctx, o.n)
	if err != nil {
		return err
	}
	var tokens []string
	var bodies [][]byte
	if o.baselines {
		if tokens, err = loadTokens(ctx, db, max(o.probeN, o.multiN, o.seqN)); err != nil {
			return err
		}
		if bodies, err = wireBodies(tokens[:o.probeN]); err != nil {
			return err
		}
	}
	emu, err := b.emulator(ctx, 0)
	if err != nil {
		return err
	}
	for i := range o.repeat {
		r, err := b.broadcast(ctx, emu, db, o.c, fmt.Sprintf("run%d", i+1), o.n <= 200_000)
		if r != nil {
			rep.Pushfan = append(rep.Pushfan, r)
		}
		if err != nil {
			return err
		}
		if o.baselines {
			b.logf("raw net/http probe: %d sends, %d goroutines", len(bodies), o.c)
			p, err := rawProbe(ctx, emu, bodies, o.c)
			if err != nil {
				return err
			}
			rep.Probe = append(rep.Probe, p)
			b.logf("  %.0f sends/s, %.1f µs CPU/send, %d connections", p.SendsPerS, p.CPUMicrosPerMsg, p.EmuConnections)
		}
	}
	if o.smallN > 0 {
		if err := b.runSmall(ctx, emu, rep); err != nil {
			return err
		}
	}
	if o.baselines {
		b.logf("SDK SendEachForMulticast: %d tokens in batches of 500", o.multiN)
		m, err := multicastSDK(ctx, emu, tokens[:o.multiN])
		if err != nil {
			return err
		}
		rep.Multicast = m
		b.logf("  %.0f sends/s", m.SendsPerS)
		b.logf("SDK sequential Send: %d tokens", o.seqN)
		s, err := sequentialSDK(ctx, emu, tokens[:o.seqN])
		if err != nil {
			return err
		}
		rep.Sequential = s
		b.logf("  %.1f sends/s", s.SendsPerS)
	}
	return nil
}

// runSmall times three broadcasts of SMALL_N tokens on one fresh serve: the
// first pays for the connections to FCM, the others find them open.
func (b *bench) runSmall(ctx context.Context, emu *emulator, rep *report) error {
	db, err := b.seeded(ctx, b.o.smallN)
	if err != nil {
		return err
	}
	svc, err := startService(ctx, b.o.bin, b.dir, "serve-small", emu, serviceSpec{db: db, concurrency: b.o.c, rateLimit: b.o.rateLimit, extraEnv: b.o.serveEnv})
	if err != nil {
		return err
	}
	b.procs = append(b.procs, svc.p)
	defer svc.stop()
	for i, label := range []string{"cold", "warm1", "warm2"} {
		r, err := runBroadcast(ctx, svc, emu, broadcastSpec{label: fmt.Sprintf("small-%s", label), n: db.n, conc: b.o.c,
			rateLimit: b.o.rateLimit, tally: true})
		if r != nil {
			rep.Small = append(rep.Small, r)
		}
		if err != nil {
			return err
		}
		b.logf("pushfan %d tokens (%s, run %d): %.0f ms from POST to finished_at", db.n, label, i+1, r.WallSeconds*1000)
	}
	return nil
}

// sweepMinN is four chunks of pushfan's default width (10,000 token ids):
// with the default PUSHFAN_CHUNK_PARALLEL of 4, a smaller audience leaves
// chunk slots, hence workers, idle.
const sweepMinN = 40_000

func (b *bench) runSweep(ctx context.Context, rep *report) error {
	emu, err := b.emulator(ctx, 0)
	if err != nil {
		return err
	}
	for _, c := range b.o.sweep {
		n := b.o.n
		if b.o.sweepPerWorker > 0 {
			// At least sweepMinN, so that every chunk slot has a chunk and
			// the point measures C workers, not C/PUSHFAN_CHUNK_PARALLEL.
			n = min(n, max(sweepMinN, b.o.sweepPerWorker*c))
		}
		db, err := b.seeded(ctx, n)
		if err != nil {
			return err
		}
		for i := range b.o.repeat {
			r, err := b.broadcast(ctx, emu, db, c, fmt.Sprintf("sweep-c%d-run%d", c, i+1), n <= 200_000)
			if r != nil {
				rep.Sweep = append(rep.Sweep, r)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *bench) runQuota(ctx context.Context, rep *report) error {
	db, err := b.seeded(ctx, b.o.n)
	if err != nil {
		return err
	}
	emu, err := b.emulator(ctx, b.o.quota)
	if err != nil {
		return err
	}
	b.logf("emulator quota: %d per %s", b.o.quota, b.o.quotaWindow)
	r, err := b.broadcast(ctx, emu, db, b.o.c, "quota", true)
	if r != nil {
		rep.Quota = r
	}
	return err
}

// runLatency runs the broadcast at pushfan's default configuration against
// each emulator latency, over each wire protocol: one configuration should
// reach the rate limit at all of them, with few connections over HTTP/2.
func (b *bench) runLatency(ctx context.Context, rep *report) error {
	db, err := b.seeded(ctx, b.o.n)
	if err != nil {
		return err
	}
	for _, mode := range b.o.latencyModes {
		for _, lat := range b.o.latencies {
			emu, err := startEmulator(ctx, b.o.bin, b.dir, emulatorSpec{latency: lat, jitter: b.o.jitter, mode: mode})
			if err != nil {
				return err
			}
			b.procs = append(b.procs, emu.p)
			label := fmt.Sprintf("%s-%s", mode, lat)
			svc, err := startService(ctx, b.o.bin, b.dir, "serve-"+label, emu, serviceSpec{db: db, extraEnv: b.o.serveEnv})
			if err != nil {
				return err
			}
			b.procs = append(b.procs, svc.p)
			b.logf("pushfan at the defaults, emulator latency %s + jitter %s over %s: %d tokens", lat, b.o.jitter, mode, db.n)
			r, err := runBroadcast(ctx, svc, emu, broadcastSpec{label: label, n: db.n, logf: b.logf, sampleRate: true})
			svc.stop()
			emu.p.stop(5 * time.Second)
			if r != nil {
				r.EmuLatency = lat.String()
				rep.Latency = append(rep.Latency, r)
				b.logf("  %.0f sends/s (sustained %.0f), %.1f µs CPU/send, %d in flight at most, %d connections, peak RSS %.1f MB",
					r.SendsPerS, r.SustainedPerS, r.CPUMicrosPerMsg, r.EmuMaxInFlight, r.EmuConnections, r.PeakRSSMB)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}
