package campaigns

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"pushfan/campaigns"
)

// trendsCSV is the trend rows as CSV: a header, then a line per row, the
// period's start as a date in the query's zone, the ratios as fractions.
func trendsCSV(rows []campaigns.Row, loc *time.Location) [][]string {
	out := [][]string{{"group", "period_start", "broadcasts", "targeted", "succeeded", "failed", "opened", "clicked", "reach", "ctr"}}
	for _, r := range rows {
		out = append(out, []string{cell(r.Group), r.PeriodStart.In(loc).Format(time.DateOnly), num(r.Broadcasts), num(r.Targeted), num(r.Succeeded),
			num(r.Failed), num(r.Opened), num(r.Clicked), frac(&r.Reach), frac(&r.CTR)})
	}
	return out
}

// breakdownCSV is a breakdown's rows as CSV; a field not stored for a
// row is an empty cell.
func breakdownCSV(b campaigns.Breakdown) [][]string {
	out := [][]string{{"key", "broadcasts", "sent", "targeted", "succeeded", "failed", "opened", "clicked", "reach", "success_rate", "ctr", "clicks_per_sent"}}
	for _, r := range b.Rows {
		out = append(out, []string{cell(r.Key), num(r.Broadcasts), num(r.Sent), opt(r.Targeted), opt(r.Succeeded), opt(r.Failed),
			opt(r.Opened), opt(r.Clicked), frac(r.Reach), frac(r.SuccessRate), frac(r.CTR), frac(r.ClicksPerSent)})
	}
	return out
}

// cell keeps a name a spreadsheet would run as a formula (=, +, @) text.
// Categories, jobs and labels cannot start so; an A/B variant's name may.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+@", rune(s[0])) {
		return "'" + s
	}
	return s
}

func num(n int64) string { return strconv.FormatInt(n, 10) }

func opt(n *int64) string {
	if n == nil {
		return ""
	}
	return num(*n)
}

// frac writes a ratio with 6 decimals: enough for a percentage to 4.
func frac(f *float64) string {
	if f == nil {
		return ""
	}
	return strconv.FormatFloat(*f, 'f', 6, 64)
}

// writeCSV answers lines as a CSV attachment named name. The lines are
// few (a row per group and period, at most MaxDays periods), so they are
// written whole rather than streamed.
func writeCSV(c echo.Context, name string, lines [][]string) error {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.WriteAll(lines); err != nil {
		return fmt.Errorf("campaigns: csv: %w", err)
	}
	h := c.Response().Header()
	h.Set("Content-Disposition", `attachment; filename="`+name+`"`)
	return c.Blob(http.StatusOK, "text/csv; charset=utf-8", buf.Bytes())
}
