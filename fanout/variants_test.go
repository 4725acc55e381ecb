package fanout

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
)

// variantSender records which message each token got and counts Prepare.
type variantSender struct {
	prepares atomic.Int64
	got      sync.Map // token -> title
}

func (s *variantSender) Prepare(m *Message) (Prepared, error) {
	s.prepares.Add(1)
	return senderFunc(func(_ context.Context, m *Message, token string) Outcome {
		s.got.Store(token, m.Title)
		if token[0] == 'd' {
			return Outcome{Class: Dead, Code: codeUnregistered}
		}
		return Outcome{}
	}).Prepare(m)
}

// Each target gets its variant's message, each variant is prepared once
// for the run (not per target), and the counts per variant are exact,
// failures included and canceled targets excluded.
func TestRunVariantsPrepareOncePerVariantAndCountExactly(t *testing.T) {
	const n = 3000
	langs := []string{"ko", "ja", "default"}
	ts := makeTargets(n, func(i int) string {
		if i%10 == 9 {
			return fmt.Sprintf("dead-%d", i)
		}
		return fmt.Sprintf("ok-%d", i)
	})
	plats := []string{"android", "ios", "web", ""}
	want, wantPlat := map[string]Sent{}, map[string]Sent{}
	for i := range ts {
		ts[i].Locale, ts[i].Platform = langs[i%3], plats[i%4]
		want[langs[i%3]] = want[langs[i%3]].add(i%10 != 9)
		wantPlat[plats[i%4]] = wantPlat[plats[i%4]].add(i%10 != 9)
	}
	s := &variantSender{}
	e := testEngine(t, Config{Concurrency: 50, PageSize: 128}, s)
	v := &Variants{
		Names:    langs,
		Messages: []*Message{{Title: "ko"}, {Title: "ja"}, {Title: "default"}},
		Pick: func(t Target) int {
			for i, l := range langs {
				if l == t.Locale {
					return i
				}
			}
			return -1
		},
	}
	c, err := runJob(context.Background(), t, e, Job{Message: &Message{Title: "default"}, Source: &sliceSource{ts}, Variants: v})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := s.prepares.Load(); got != 4 { // the job's message and three variants
		t.Fatalf("Prepare called %d times, want 4 (once per variant, never per target)", got)
	}
	if !maps.Equal(c.Variants, want) || !maps.Equal(c.Platforms, wantPlat) {
		t.Fatalf("sends per variant %v, per platform %v; want %v and %v", c.Variants, c.Platforms, want, wantPlat)
	}
	if c.Succeeded+c.Failed != n || c.Failed != n/10 {
		t.Fatalf("committed %+v, want %d sent, %d failed, variants %v", c, n, n/10, want)
	}
	for _, tg := range ts {
		title, ok := s.got.Load(tg.Token)
		if !ok || title != tg.Locale {
			t.Fatalf("target %s (locale %s) got %v", tg.Token, tg.Locale, title)
		}
	}
}

// A Pick out of range fails the target instead of panicking, and counts it
// under no variant.
func TestRunVariantsBadPickFailsTheTarget(t *testing.T) {
	ts := makeTargets(10, func(i int) string { return fmt.Sprintf("ok-%d", i) })
	s := &variantSender{}
	e := testEngine(t, Config{}, s)
	v := &Variants{Names: []string{"a"}, Messages: []*Message{{Title: "a"}}, Pick: func(t Target) int {
		if t.Cursor <= 3 {
			return 7
		}
		return 0
	}}
	c, err := runJob(context.Background(), t, e, Job{Source: &sliceSource{ts}, Variants: v})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if c.Failed != 3 || c.Errors[CodeMessage] != 3 || c.Succeeded != 7 || c.Variants["a"] != (Sent{Succeeded: 7}) || len(c.Variants) != 1 {
		t.Fatalf("committed %+v", c)
	}
}
