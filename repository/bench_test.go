package repository_test

import (
	"math"
	"testing"
	"time"

	"pushfan/internal/devtools/demo"
	"pushfan/model"
	"pushfan/repository"
)

// BenchmarkAudiencePage pages an "all" audience of 100k seeded tokens with
// pages of 1000, the way the engine does, and reports tokens/s.
func BenchmarkAudiencePage(b *testing.B) {
	s := newStore(b)
	_, seeded, err := demo.New(s.DB(), nil).SeedDemo(ctx(b), demo.SeedOptions{Users: 100_000, TokensPerUserMax: 1})
	if err != nil {
		b.Fatal(err)
	}
	a := model.Audience{All: true}
	buf := make([]repository.Target, 0, 1000)
	var total int64
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		var after uint64
		for {
			page, err := s.AudiencePage(b.Context(), a, after, math.MaxUint64, 1000, buf)
			if err != nil {
				b.Fatal(err)
			}
			total += int64(len(page))
			if len(page) < 1000 {
				break
			}
			after = page[len(page)-1].TokenID
			buf = page
		}
	}
	elapsed := time.Since(start)
	if total%seeded != 0 {
		b.Fatalf("paged %d tokens, not a multiple of %d", total, seeded)
	}
	b.ReportMetric(float64(total)/elapsed.Seconds(), "tokens/s")
}

// BenchmarkSeedDemo measures seeding speed (tokens/s) on a fresh database per
// iteration batch: 100k users with 1-3 tokens each (200k tokens).
func BenchmarkSeedDemo(b *testing.B) {
	s := newStore(b)
	var tokens int64
	var start uint64 = 1
	b.ResetTimer()
	t0 := time.Now()
	for b.Loop() {
		_, n, err := demo.New(s.DB(), nil).SeedDemo(ctx(b), demo.SeedOptions{Users: 100_000, TokensPerUserMax: 3, StartUserID: start})
		if err != nil {
			b.Fatal(err)
		}
		tokens += n
		start += 100_000
	}
	b.ReportMetric(float64(tokens)/time.Since(t0).Seconds(), "tokens/s")
}
