package campaigns

import (
	"fmt"
	"testing"
	"time"

	"pushfan/campaigns"
)

// The CSV writes each row's numbers as they are, the period as a date in
// the query's zone, a field not stored as an empty cell, and keeps a
// variant name a spreadsheet would run as a formula as text.
func TestTheCSVIsTheRows(t *testing.T) {
	seoul, err := time.LoadLocation("Asia/Seoul")
	if err != nil {
		t.Fatal(err)
	}
	rows := trendsCSV([]campaigns.Row{{Group: "promo", PeriodStart: time.Date(2026, 11, 30, 0, 0, 0, 0, seoul),
		Totals: campaigns.Totals{Broadcasts: 2, Targeted: 10, Succeeded: 8, Failed: 2, Opened: 3, Clicked: 1, Reach: 0.8, CTR: 0.125}}}, seoul)
	if got, want := fmt.Sprint(rows[1]), "[promo 2026-11-30 2 10 8 2 3 1 0.800000 0.125000]"; got != want {
		t.Fatalf("trend line %s, want %s", got, want)
	}
	n, two, one, quarter := int64(5), int64(2), int64(1), 0.25
	b := breakdownCSV(campaigns.Breakdown{Rows: []campaigns.Slice{
		{Key: "=HYPERLINK(1)", Broadcasts: 1, Sent: 4, Opened: &two, Clicked: &one, ClicksPerSent: &quarter},
		{Key: "shop", Broadcasts: 1, Sent: 5, Targeted: &n, Succeeded: &n, Failed: new(int64), Opened: new(int64), Clicked: new(int64),
			Reach: new(float64), SuccessRate: new(float64), CTR: new(float64), ClicksPerSent: new(float64)},
		{Key: "ios", Broadcasts: 1, Sent: 5, Succeeded: &n, Failed: new(int64), SuccessRate: new(float64)},
	}})
	if got, want := fmt.Sprint(b[1]), "['=HYPERLINK(1) 1 4    2 1    0.250000]"; got != want {
		t.Fatalf("breakdown line %q, want %q", got, want)
	}
	if got, want := fmt.Sprint(b[3]), "[ios 1 5  5 0    0.000000  ]"; got != want {
		t.Fatalf("breakdown line %q, want %q", got, want)
	}
	if got, want := fmt.Sprint(b[2]), "[shop 1 5 5 5 0 0 0 0.000000 0.000000 0.000000 0.000000]"; got != want {
		t.Fatalf("breakdown line %q, want %q", got, want)
	}
}
