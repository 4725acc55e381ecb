package main

import (
	"math"
	"strings"
	"testing"
)

const exposition = `# HELP pushfan_fcm_send_duration_seconds Duration of one send attempt.
# TYPE pushfan_fcm_send_duration_seconds histogram
pushfan_fcm_send_duration_seconds_bucket{le="0.01"} 0
pushfan_fcm_send_duration_seconds_bucket{le="0.03"} 40
pushfan_fcm_send_duration_seconds_bucket{le="0.05"} 90
pushfan_fcm_send_duration_seconds_bucket{le="0.1"} 100
pushfan_fcm_send_duration_seconds_bucket{le="+Inf"} 100
pushfan_fcm_send_duration_seconds_sum 3.2
pushfan_fcm_send_duration_seconds_count 100
pushfan_other_bucket{le="0.01"} 7
`

func TestHistogramQuantile(t *testing.T) {
	h, ok, err := parseHistogram(strings.NewReader(exposition), latencyHist)
	if err != nil || !ok {
		t.Fatalf("parse: ok=%v err=%v", ok, err)
	}
	if h.count() != 100 {
		t.Fatalf("count %v", h.count())
	}
	for _, c := range []struct{ q, want float64 }{
		{0.2, 0.02},   // 20 of the 40 in (0.01, 0.03]
		{0.5, 0.034},  // 10 of the 50 in (0.03, 0.05]
		{0.95, 0.075}, // 5 of the 10 in (0.05, 0.1]
	} {
		if got := h.quantile(c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("q%.2f = %v, want %v", c.q, got, c.want)
		}
	}
	// A delta over one run subtracts bucket by bucket.
	prev := histogram{le: h.le, cum: []float64{0, 40, 40, 40, 40}}
	if d := h.sub(prev); d.count() != 60 || math.Abs(d.quantile(0.5)-0.042) > 1e-9 {
		t.Errorf("delta: count %v, median %v", d.count(), d.quantile(0.5))
	}
}

func TestHistogramSumsLabels(t *testing.T) {
	in := `m_bucket{outcome="ok",le="0.1"} 3
m_bucket{le="0.1",outcome="dead"} 1
m_bucket{outcome="ok",le="+Inf"} 3
m_bucket{le="+Inf",outcome="dead"} 1
`
	h, ok, err := parseHistogram(strings.NewReader(in), "m")
	if err != nil || !ok || h.count() != 4 || len(h.le) != 2 {
		t.Fatalf("got %+v ok=%v err=%v", h, ok, err)
	}
	if _, ok, _ := parseHistogram(strings.NewReader(in), "absent"); ok {
		t.Error("absent metric reported present")
	}
}

func TestSustained(t *testing.T) {
	s := []sample{{AtMS: 1000, Accepted: 5}, {AtMS: 2000, Accepted: 15}, {AtMS: 3000, Accepted: 55}, {AtMS: 4000, Accepted: 95}}
	if got := sustained(s, 100); got != 40 { // 15 → 95 between 2 s and 4 s
		t.Errorf("sustained %v, want 40", got)
	}
	if got := sustained(s[:1], 100); got != 0 {
		t.Errorf("too short: %v", got)
	}
}
