package broadcast

import (
	"testing"
	"time"
)

// A day of per-minute fires of one job: every offset is inside the spread,
// on a microsecond step, the same when computed again, and the offsets are
// spread over the whole window rather than bunched (each fifth of it gets a
// fair share).
func TestStartOffsetStaysWithinTheSpreadAndIsDeterministic(t *testing.T) {
	const spread = 5 * time.Second
	const fires = 1440
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var buckets [5]int
	distinct := map[time.Duration]bool{}
	for i := range fires {
		key := "cron:digest:" + day.Add(time.Duration(i)*time.Minute).Format(time.RFC3339Nano)
		off := StartOffset(key, spread)
		if off < 0 || off >= spread {
			t.Fatalf("%s: offset %v outside [0, %v)", key, off, spread)
		}
		if off%time.Microsecond != 0 {
			t.Fatalf("%s: offset %v is not in microseconds (starts_at is DATETIME(6))", key, off)
		}
		if again := StartOffset(key, spread); again != off {
			t.Fatalf("%s: offset %v then %v", key, off, again)
		}
		buckets[off/(spread/5)]++
		distinct[off] = true
	}
	if len(distinct) < fires*9/10 {
		t.Fatalf("only %d distinct offsets over %d fires", len(distinct), fires)
	}
	for i, n := range buckets {
		// 288 expected per fifth; a uniform hash stays far inside this.
		if n < 200 || n > 380 {
			t.Fatalf("fifth %d of the spread got %d of %d fires: %v", i, n, fires, buckets)
		}
	}
}

func TestStartOffsetWithoutASpreadIsZero(t *testing.T) {
	for _, spread := range []time.Duration{0, -time.Second, 999 * time.Nanosecond} {
		if off := StartOffset("cron:digest:2026-12-01T09:00:00Z", spread); off != 0 {
			t.Fatalf("spread %v: offset %v, want 0", spread, off)
		}
	}
	// A spread of one step leaves one offset: 0.
	if off := StartOffset("k", time.Microsecond); off != 0 {
		t.Fatalf("spread 1µs: offset %v", off)
	}
}
