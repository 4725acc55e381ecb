package console_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// pagesConfig is a PUSHFAN_CONFIG with one named audience and one job, so
// the audiences and cron pages have something to show.
// lowIDsAudience is a named audience of the users up to an id, for the
// configs of the pages and cron tests.
const lowIDsAudience = `
audiences:
  - name: low_ids
    description: users up to an id
    params:
      max_user: int
    sql: |
      SELECT t.id AS ` + "`cursor`" + `, t.user_id, t.token
      FROM device_tokens t JOIN users u ON u.id = t.user_id
      WHERE t.id > :after AND t.invalidated_at IS NULL AND u.push_enabled = 1 AND u.id <= :max_user
      ORDER BY t.id LIMIT :limit
`

const pagesConfig = lowIDsAudience + `jobs:
  - name: morning_digest
    schedule: "0 0 9 * * *"
    timezone: Asia/Seoul
    enabled: true
    audience:
      name: low_ids
      params: {max_user: 5}
    message:
      title: Good morning
      body: Your digest
`

// TestConsoleOperatorPages walks what an operator looks at besides one
// broadcast: the dashboard, the list with its filters and keyset paging,
// the cron jobs, the named audiences with a count, and the cluster.
func TestConsoleOperatorPages(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "pushfan.yaml")
	if err := os.WriteFile(cfgPath, []byte(pagesConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, 30, "PUSHFAN_CONFIG="+cfgPath, "PUSHFAN_SUBMIT_PER_MINUTE=100000")
	// 55 finished broadcasts (more than the list's page of 50) and a held one.
	const finished = 55
	for i := range finished {
		var b broadcast
		if code := e.api("POST", "/push/broadcast", map[string]any{"title": fmt.Sprintf("n%d", i), "body": "b", "audience": map[string]any{"user_ids": []int{i%30 + 1}}}, &b); code != 200 || b.Status != "completed" {
			t.Fatalf("broadcast %d: %d %+v", i, code, b)
		}
	}
	var held broadcast
	if code := e.api("POST", "/push/broadcast?wait=0", map[string]any{"title": "Held", "body": "b", "audience": map[string]any{"all": true}, "hold": true}, &held); code != 202 && code != 200 {
		t.Fatalf("held: %d", code)
	}
	e.signIn(senderToken)
	// One app (the environment's, default): no app switcher, no app named.
	if eval[bool](e, "looking for an app switcher", `!!document.querySelector('#app-switcher') || 'app' in document.body.dataset`) {
		t.Fatal("a single app shows an app switcher")
	}

	// Dashboard: the totals and a bar per recent broadcast.
	var stats struct{ Broadcasts, Succeeded int64 }
	e.api("GET", "/push/stats", nil, &stats)
	if got := e.count("#stat-broadcasts"); got != stats.Broadcasts {
		t.Errorf("dashboard broadcasts %d, API %d", got, stats.Broadcasts)
	}
	if got := e.count("#stat-succeeded"); got != stats.Succeeded {
		t.Errorf("dashboard succeeded %d, API %d", got, stats.Succeeded)
	}
	if n := eval[int](e, "counting the chart's bars", `document.querySelectorAll('#success-chart a').length`); n != 20 {
		t.Errorf("the success-rate chart has %d bars, want the last 20 broadcasts", n)
	}
	e.shot("dashboard")

	// The list: 50 newest, then the rest by keyset, and filters.
	e.route("#/broadcasts")
	e.page("broadcasts")
	rows := func() int {
		return eval[int](e, "counting rows", `document.querySelectorAll('#broadcasts-table tbody tr[data-id]').length`)
	}
	if n := rows(); n != 50 {
		t.Fatalf("first page: %d rows, want 50", n)
	}
	first := eval[int](e, "the first row", `Number(document.querySelector('#broadcasts-table tbody tr[data-id]').dataset.id)`)
	e.click("#list-older")
	e.waitFor("the older page", 10*time.Second, fmt.Sprintf(`document.querySelectorAll('#broadcasts-table tbody tr[data-id]').length === %d`, finished+1-50))
	if last := eval[int](e, "the last row", `Number([...document.querySelectorAll('#broadcasts-table tbody tr[data-id]')].pop().dataset.id)`); last != 1 || first != int(held.ID) {
		t.Fatalf("pages run from #%d to #%d; want from the held #%d to #1", first, last, held.ID)
	}
	e.setValue("#filter-status", "held")
	e.waitFor("the held filter", 10*time.Second, fmt.Sprintf(`(() => { const r = document.querySelectorAll('#broadcasts-table tbody tr[data-id]'); return r.length === 1 && r[0].dataset.id === '%d' })()`, held.ID))

	// Cron: the job, its zone and its next fires.
	e.route("#/cron")
	e.page("cron")
	e.waitFor("the job with its schedule in words and its next fire", 10*time.Second, `document.querySelector('main').textContent.includes('morning_digest') && document.querySelector('main').textContent.includes('every day at 09:00') && document.querySelector('main').textContent.includes('Asia/Seoul') && document.querySelectorAll('main td.job-next time').length === 1`)

	// Audiences: the named one with its typed parameter, counted.
	e.route("#/audiences")
	e.page("audiences")
	e.waitFor("the named audience and its parameter", 10*time.Second, `document.querySelector('main').textContent.includes('low_ids') && document.querySelector('main').textContent.includes('max_user')`)
	var want struct {
		Count int64 `json:"count"`
	}
	e.api("POST", "/push/audiences/low_ids/preview", map[string]any{"params": map[string]any{"max_user": 10}}, &want)
	e.setValue(`input[data-param="max_user"]`, "10")
	eval[bool](e, "submitting the count form", `(document.querySelector('form.count-form').requestSubmit(), true)`)
	e.waitFor(fmt.Sprintf("the count %d", want.Count), 10*time.Second, fmt.Sprintf(`%s === '%d'`, text("form.count-form ~ .count-out .count, .count-out .count"), want.Count))

	// Cluster: this instance is a member of the budget.
	e.route("#/cluster")
	e.page("cluster")
	e.waitFor("this instance in the members", 10*time.Second, `document.querySelectorAll('#members tr[data-instance]').length === 1`)
	e.shot("")
}
