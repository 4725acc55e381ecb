package deliveries_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"pushfan/lease/outcome"
	"pushfan/outcomes"
	"pushfan/server/deliveries"
)

// slowExport lists n failed targets of user user_id i%10, a pause each:
// an export that reads for longer than the server's write timeout.
type slowExport struct {
	n     int
	pause time.Duration
}

func (s slowExport) Deliveries(context.Context, uint64, int, uint64) (outcomes.Page, error) {
	return outcomes.Page{}, nil
}

func (s slowExport) Export(ctx context.Context, _ uint64, _ outcome.Kind, fn func(outcomes.Line) error) error {
	for i := range s.n {
		if i%100 == 0 {
			time.Sleep(s.pause)
		}
		if err := fn(outcomes.Line{UserID: uint64(i%10 + 1), TokenID: uint64(i + 1), Outcome: "failed", Code: "UNREGISTERED"}); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// An export outlasts the server's write timeout (PUSHFAN_HTTP_WRITE_TIMEOUT
// bounds a whole answer; a 10M export streams for longer), filtered or
// not: each thousand lines read move the deadline on.
func TestAnExportOutlastsTheWriteTimeout(t *testing.T) {
	srv := httptest.NewUnstartedServer(newEcho(&deliveries.Routes{Domain: slowExport{n: 3000, pause: 40 * time.Millisecond}}))
	srv.Config.WriteTimeout = 500 * time.Millisecond // the export takes about 1.2 s
	srv.Start()
	t.Cleanup(srv.Close)
	client := &http.Client{Timeout: 30 * time.Second}
	for _, tc := range []struct {
		query string
		lines int
	}{
		{"format=csv", 3000},
		{"format=csv&user_id=3", 300}, // silent between its lines
	} {
		resp, err := client.Get(srv.URL + "/push/broadcasts/1/outcomes?" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		lines := 0
		for sc.Scan() {
			if !strings.HasPrefix(sc.Text(), "user_id,") {
				lines++
			}
		}
		err = sc.Err()
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil || lines != tc.lines {
			t.Fatalf("%s: %d, %d lines (%v), want 200 and %d lines", tc.query, resp.StatusCode, lines, err, tc.lines)
		}
	}
}
