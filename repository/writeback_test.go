package repository_test

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pushfan/internal/platform/sqldb"
	"pushfan/model"
	"pushfan/repository"
)

// mappedStore is a Store whose schema maps app tables made in the test's
// database: members, and push_devices with tokens devtoken-000i-… (ids
// 1..n), whose on_dead a trigger refuses for the device_seq listed in
// wb_refuse, quoting the whole token in its message.
func mappedStore(t *testing.T, n int) *repository.Store {
	t.Helper()
	s := newStore(t)
	exec(t, s, `CREATE TABLE members (member_id BIGINT UNSIGNED NOT NULL PRIMARY KEY, push_agree CHAR(1) NOT NULL DEFAULT 'Y')`)
	exec(t, s, `CREATE TABLE push_devices (device_seq BIGINT UNSIGNED NOT NULL PRIMARY KEY, member_id BIGINT UNSIGNED NOT NULL,
		fcm_token VARCHAR(255) NOT NULL, deleted_yn CHAR(1) NOT NULL DEFAULT 'N', dead_code VARCHAR(64) NULL)`)
	exec(t, s, `CREATE TABLE wb_refuse (device_seq BIGINT UNSIGNED NOT NULL PRIMARY KEY)`)
	exec(t, s, `CREATE TRIGGER push_devices_refuse BEFORE UPDATE ON push_devices FOR EACH ROW BEGIN
		DECLARE msg VARCHAR(255) DEFAULT CONCAT('refused ', NEW.fcm_token);
		IF EXISTS (SELECT 1 FROM wb_refuse WHERE device_seq = NEW.device_seq) THEN
			SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
		END IF;
	END`)
	for i := 1; i <= n; i++ {
		exec(t, s, "INSERT INTO members (member_id) VALUES (?)", i)
		exec(t, s, "INSERT INTO push_devices (device_seq, member_id, fcm_token) VALUES (?, ?, ?)", i, i, devToken(i))
	}
	sc, err := repository.CompileSchema(model.SchemaMapping{
		Users: &model.UsersMapping{Table: "members", ID: "member_id", PushEnabled: "push_agree = 'Y'"},
		Tokens: &model.TokensMapping{Table: "push_devices", ID: "device_seq", UserID: "member_id", Token: "fcm_token",
			Valid:  "deleted_yn = 'N'",
			OnDead: "UPDATE push_devices SET deleted_yn = 'Y', dead_code = :code WHERE device_seq = :id AND deleted_yn = 'N'"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Check(ctx(t), s.DB()); err != nil {
		t.Fatal(err)
	}
	return s.WithSchema(sc)
}

func devToken(i int) string { return fmt.Sprintf("devtoken-%04d-abcdefghijklmnopqrstuvwxyz", i) }

// deadOf is the failure rows and dead tokens of devices ids of broadcast 1.
func deadOf(ids ...int) ([]model.Failure, []repository.Invalidation) {
	var fs []model.Failure
	var dead []repository.Invalidation
	for _, i := range ids {
		fs = append(fs, model.Failure{BroadcastID: 1, TokenID: uint64(i), UserID: uint64(i), Code: "UNREGISTERED"})
		dead = append(dead, repository.Invalidation{TokenID: uint64(i), Token: devToken(i), Reason: "UNREGISTERED"})
	}
	return fs, dead
}

// A refused on_dead is rolled back alone: the checkpoint's transaction
// keeps its failure rows and the other tokens' write-backs, and the answer
// names exactly the refused tokens, without quoting a whole token and
// without looking like a lock conflict to retry. Stored again without
// them, the checkpoint commits.
func TestWriteBackIsolatesARefusedOnDead(t *testing.T) {
	s := mappedStore(t, 6)
	exec(t, s, "INSERT INTO wb_refuse VALUES (2), (4)")
	fs, dead := deadOf(5, 1, 2, 3, 4)

	tx, err := s.DB().BeginTx(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	n, err := s.WriteOutcomes(ctx(t), tx, fs, dead)
	var wbe *repository.WriteBackError
	if !errors.As(err, &wbe) {
		t.Fatalf("write-back with two refused tokens: %v, want a *WriteBackError", err)
	}
	var refused []uint64
	for _, f := range wbe.Failed {
		refused = append(refused, f.TokenID)
	}
	if !slices.Equal(refused, []uint64{2, 4}) || n != 3 {
		t.Fatalf("refused %v with %d rows written, want tokens [2 4] refused and 3 written", refused, n)
	}
	if msg := err.Error(); strings.Contains(msg, devToken(2)) || !strings.Contains(msg, "token 2") {
		t.Fatalf("error %q: it names the token id and never the whole token", msg)
	}
	if sqldb.IsRetryable(err) {
		t.Fatal("a refused write-back is taken for a lock conflict")
	}
	var written, failures int
	if err := tx.QueryRowContext(ctx(t), "SELECT COUNT(*) FROM push_devices WHERE deleted_yn = 'Y'").Scan(&written); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRowContext(ctx(t), "SELECT COUNT(*) FROM broadcast_failures").Scan(&failures); err != nil {
		t.Fatal(err)
	}
	if written != 3 || failures != 5 {
		t.Fatalf("in the transaction after the refusals: %d tokens written back, %d failure rows; want 3 and 5", written, failures)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}

	// The caller's next attempt leaves the refused tokens out.
	tx, err = s.DB().BeginTx(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	kept := slices.DeleteFunc(slices.Clone(dead), func(d repository.Invalidation) bool { return d.TokenID == 2 || d.TokenID == 4 })
	if n, err := s.WriteOutcomes(ctx(t), tx, fs, kept); err != nil || n != 3 {
		t.Fatalf("without the refused tokens: %d, %v; want 3 written", n, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	if err := s.DB().SelectContext(ctx(t), &ids, "SELECT device_seq FROM push_devices WHERE deleted_yn = 'Y' AND dead_code = 'UNREGISTERED' ORDER BY device_seq"); err != nil {
		t.Fatal(err)
	}
	if err := s.DB().GetContext(ctx(t), &failures, "SELECT COUNT(*) FROM broadcast_failures"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []uint64{1, 3, 5}) || failures != 5 {
		t.Fatalf("stored: tokens %v written back, %d failure rows; want [1 3 5] and 5", ids, failures)
	}
}

// A write-back refused once and accepted when run again (within the same
// attempt, each statement under its own savepoint) is no failure.
func TestWriteBackRefusedOnceThenAccepted(t *testing.T) {
	s := mappedStore(t, 3)
	// The trigger refuses device 2 once: it records the refusal in a
	// MyISAM table, which the statement's rollback does not undo.
	exec(t, s, "CREATE TABLE wb_once (device_seq BIGINT UNSIGNED NOT NULL PRIMARY KEY) ENGINE=MyISAM")
	exec(t, s, "DROP TRIGGER push_devices_refuse")
	exec(t, s, `CREATE TRIGGER push_devices_once BEFORE UPDATE ON push_devices FOR EACH ROW BEGIN
		IF NEW.device_seq = 2 AND NOT EXISTS (SELECT 1 FROM wb_once WHERE device_seq = 2) THEN
			INSERT INTO wb_once VALUES (2);
			SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'not now';
		END IF;
	END`)
	fs, dead := deadOf(1, 2, 3)
	err := sqldb.InTx(ctx(t), s.DB().DB, nil, "write back", func(tx *sql.Tx) error {
		n, err := s.WriteOutcomes(ctx(t), tx, fs, dead)
		if err == nil && n != 3 {
			err = fmt.Errorf("%d rows written back, want 3", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var refusals, written int
	if err := s.DB().GetContext(ctx(t), &refusals, "SELECT COUNT(*) FROM wb_once"); err != nil || refusals != 1 {
		t.Fatalf("device 2 refused %d times (%v), want once: the test proves nothing", refusals, err)
	}
	if err := s.DB().GetContext(ctx(t), &written, "SELECT COUNT(*) FROM push_devices WHERE deleted_yn = 'Y'"); err != nil || written != 3 {
		t.Fatalf("%d tokens written back (%v), want 3", written, err)
	}
}
