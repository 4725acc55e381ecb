package metrics

import (
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"pushfan/internal/testsupport/testdb"
)

// The cluster's state comes from the database at each scrape: chunks per
// app and state (not-due ones left out), the webhook backlog and the
// disabled endpoints, the configured apps and endpoints at 0; a database
// that does not answer is pushfan_database_up 0 and nothing else.
func TestStateReadsTheClusterFromTheDatabase(t *testing.T) {
	tdb := testdb.New(t)
	exec := func(q string) {
		t.Helper()
		if _, err := tdb.SQL.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO broadcast_chunks (broadcast_id, seq, lo_id, hi_id, cursor_id, status, app) VALUES
		(1, 0, 0, 10, 0, 'leased', 'default'), (1, 1, 10, 20, 10, 'pending', 'default'), (1, 2, 20, 30, 20, 'pending', 'default'),
		(1, 3, 30, 40, 30, 'done', 'default'), (2, 0, 0, 10, 0, 'waiting', 'shop'), (2, 1, 10, 20, 10, 'pending', 'shop')`)
	exec(`INSERT INTO webhook_outbox (msg_id, endpoint, type, body, status) VALUES
		('m1', 'crm', 'broadcast.finished', '{}', 'pending'), ('m2', 'crm', 'broadcast.finished', '{}', 'pending'),
		('m3', 'crm', 'broadcast.finished', '{}', 'delivered'), ('m4', 'gone', 'broadcast.finished', '{}', 'pending')`)
	exec(`INSERT INTO webhook_endpoints (name, disabled_at, reason) VALUES ('gone', UTC_TIMESTAMP(6), 'failed for a day'), ('crm', NULL, NULL)`)

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	NewState(reg, tdb.SQL.DB, []string{"default", "shop", "idle"}, []string{"crm", "quiet"}, 5*time.Second, log)
	got := gather(t, reg)
	want := []string{
		`pushfan_chunks{app="default",state="running"} 1`,
		`pushfan_chunks{app="default",state="waiting"} 2`,
		`pushfan_chunks{app="idle",state="running"} 0`,
		`pushfan_chunks{app="idle",state="waiting"} 0`,
		`pushfan_chunks{app="shop",state="running"} 0`,
		`pushfan_chunks{app="shop",state="waiting"} 1`,
		`pushfan_database_up{} 1`,
		`pushfan_webhook_backlog{endpoint="crm"} 2`,
		`pushfan_webhook_backlog{endpoint="gone"} 1`,
		`pushfan_webhook_backlog{endpoint="quiet"} 0`,
		`pushfan_webhook_endpoint_disabled{endpoint="crm"} 0`,
		`pushfan_webhook_endpoint_disabled{endpoint="gone"} 1`,
		`pushfan_webhook_endpoint_disabled{endpoint="quiet"} 0`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("gathered:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	tdb.SQL.DB.Close()
	if got := gather(t, reg); strings.Join(got, "\n") != `pushfan_database_up{} 0` {
		t.Fatalf("with the pool closed, gathered:\n%s\nwant only pushfan_database_up 0", strings.Join(got, "\n"))
	}
}

// gather renders reg's samples as sorted `name{labels} value` lines.
func gather(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+`="`+l.GetValue()+`"`)
			}
			out = append(out, f.GetName()+"{"+strings.Join(ls, ",")+"} "+value(m))
		}
	}
	sort.Strings(out)
	return out
}

func value(m *dto.Metric) string { return strconv.FormatFloat(m.GetGauge().GetValue(), 'f', -1, 64) }
