package sends_test

import (
	"fmt"
	"testing"

	"pushfan/internal/testsupport/testdb"
	"pushfan/lease/sends"
)

// A platform counts under its name in any case, anything else as other;
// the broadcasts row and the variant rows add exactly what is given, a
// variant's targets staying succeeded + failed.
func TestSplitAddsExactlyWhereTheCheckpointWrites(t *testing.T) {
	t.Parallel()
	db := testdb.New(t).SQL.DB
	ctx := t.Context()
	var s sends.Split
	for _, c := range []struct {
		p string
		n sends.Sent
	}{{"android", sends.Sent{Succeeded: 3, Failed: 1}}, {"IOS", sends.Sent{Succeeded: 2}}, {"Web", sends.Sent{Failed: 4}},
		{"", sends.Sent{Succeeded: 1}}, {"windows", sends.Sent{Succeeded: 1, Failed: 1}}, {"ios", sends.Sent{Succeeded: 5}}} {
		s.AddPlatform(c.p, c.n)
	}
	if want := [4]sends.Sent{{Succeeded: 3, Failed: 1}, {Succeeded: 7}, {Failed: 4}, {Succeeded: 2, Failed: 1}}; s.Platforms != want {
		t.Fatalf("platforms %v, want %v", s.Platforms, want)
	}
	res, err := db.Exec(`INSERT INTO broadcasts (message, audience) VALUES ('{}', '{"all":true}')`)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	for range 2 { // two checkpoints of the same sends
		set, args := s.PlatformSet()
		if _, err := db.ExecContext(ctx, "UPDATE broadcasts SET succeeded = succeeded + 0"+set+" WHERE id = ?", append(args, id)...); err != nil {
			t.Fatal(err)
		}
		if err := sends.AddVariants(ctx, db, uint64(id), map[string]sends.Sent{"ko": {Succeeded: 4, Failed: 1}, "default": {Succeeded: 2}, "ja": {}}); err != nil {
			t.Fatal(err)
		}
	}
	var got [8]int64
	if err := db.QueryRow("SELECT "+sends.PlatformColumns("b")+" FROM broadcasts b WHERE id = ?", id).
		Scan(&got[0], &got[1], &got[2], &got[3], &got[4], &got[5], &got[6], &got[7]); err != nil {
		t.Fatal(err)
	}
	if want := [8]int64{6, 2, 14, 0, 0, 8, 4, 2}; got != want {
		t.Fatalf("platform columns %v, want %v", got, want)
	}
	rows, err := db.Query("SELECT variant, targets, succeeded, failed FROM broadcast_variants WHERE broadcast_id = ? ORDER BY variant", id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var v string
		var n, ok, f int64
		if err := rows.Scan(&v, &n, &ok, &f); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("%s %d=%d+%d", v, n, ok, f))
	}
	if got, want := len(lines), 2; got != want || lines[0] != "default 4=4+0" || lines[1] != "ko 10=8+2" {
		t.Fatalf("variant rows %v", lines)
	}
}
