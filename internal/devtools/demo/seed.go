// Package demo seeds deterministic demo and benchmark data: users, their
// device tokens (some disabled, invalidated, or named so the emulator
// answers UNREGISTERED) and the example configuration's subscriptions
// table. It is for `pushfan seed`, tests and benchmarks, never for the
// production store.
package demo

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"pushfan/internal/platform/sqldb"

	"github.com/jmoiron/sqlx"
)

// DeadTokenPrefix starts the names of seeded tokens meant to be dead: the FCM
// emulator answers UNREGISTERED (404) for tokens with this prefix.
const DeadTokenPrefix = "unregistered-"

// SeedOptions describes deterministic demo/bench data. User i (counting from
// StartUserID) gets 1 + (i mod TokensPerUserMax) tokens, so with a maximum of
// 3 users cycle through 1, 2, 3 tokens.
type SeedOptions struct {
	Users            int    // how many users
	TokensPerUserMax int    // tokens per user cycle 1..TokensPerUserMax (0 = 1)
	DisabledEvery    int    // every Nth user (by id) has push_enabled = 0; 0 = none
	InvalidatedEvery int    // every Nth seeded token is already invalidated; 0 = none
	DeadEvery        int    // every Nth seeded token is named DeadTokenPrefix+...; 0 = none
	StartUserID      uint64 // first user id (0 = 1)
}

const (
	seedRowsPerInsert = 1000 // rows per multi-row INSERT
	seedUsersPerTx    = 5000 // users (and their tokens) per transaction
	seedReason        = "seeded"
	seedWorkers       = 2 // concurrent transactions: enough to keep the server busy during round trips
)

// SeedTokenName returns the token string SeedDemo gives user userID's nth
// token (n from 1), so tests and tools can predict it.
func SeedTokenName(userID uint64, n int, dead bool) string {
	b := make([]byte, 0, 48)
	if dead {
		b = append(b, DeadTokenPrefix...)
	}
	b = append(b, "tok-"...)
	b = strconv.AppendUint(b, userID, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(n), 10)
	return string(b)
}

// Seeder writes demo data through one pool.
type Seeder struct {
	db  *sqlx.DB
	log *slog.Logger
}

// New returns a Seeder on db.
func New(db *sqlx.DB, log *slog.Logger) *Seeder { return &Seeder{db: db, log: sqldb.OrDiscard(log)} }

// SeedDemo inserts deterministic users and device tokens (see SeedOptions)
// and returns how many of each it inserted. It is idempotent: rows that exist
// already (same user id, same token string) are skipped by INSERT IGNORE, so
// seeding twice inserts nothing the second time.
//
// Speed comes from multi-row INSERTs of 1000 rows, several per transaction
// (one log flush per 5000 users rather than per row), and from a few
// transactions running in parallel: a single connection leaves the server
// mostly idle between statements. The rows are deterministic; the ids the
// database assigns to tokens of different blocks may interleave.
func (s *Seeder) SeedDemo(ctx context.Context, o SeedOptions) (users, tokens int64, err error) {
	if o.Users < 0 || o.TokensPerUserMax < 0 || o.DisabledEvery < 0 || o.InvalidatedEvery < 0 || o.DeadEvery < 0 {
		return 0, 0, fmt.Errorf("seed: negative option in %+v", o)
	}
	o.TokensPerUserMax = max(o.TokensPerUserMax, 1)
	if o.StartUserID == 0 {
		o.StartUserID = 1
	}
	began := time.Now()
	now := began.UTC().Truncate(time.Microsecond) // what a DATETIME(6) holds

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	blocks := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		nu, nt   atomic.Int64
	)
	for range min(seedWorkers, (o.Users+seedUsersPerTx-1)/seedUsersPerTx) {
		wg.Go(func() {
			sd := seeder{now: now, opts: o}
			for first := range blocks {
				u, t, err := s.seedBlock(ctx, &sd, first, min(first+seedUsersPerTx, o.Users))
				nu.Add(u)
				nt.Add(t)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					return
				}
			}
		})
	}
feed:
	for first := 0; first < o.Users; first += seedUsersPerTx {
		select {
		case blocks <- first:
		case <-ctx.Done():
			break feed
		}
	}
	close(blocks)
	wg.Wait()
	users, tokens = nu.Load(), nt.Load()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = fmt.Errorf("seed: %w", ctx.Err())
	}
	if firstErr != nil {
		return users, tokens, firstErr
	}
	s.log.Info("seeded demo data", "users", users, "tokens", tokens, "duration", time.Since(began).Round(time.Millisecond))
	return users, tokens, nil
}

// seedBlock inserts users [first, last) (as indexes from StartUserID) and
// their tokens in one transaction.
func (s *Seeder) seedBlock(ctx context.Context, sd *seeder, first, last int) (users, tokens int64, err error) {
	o := sd.opts
	err = sqldb.InTx(ctx, s.db.DB, s.log, "seed", func(tx *sql.Tx) error {
		users, tokens = 0, 0 // a retried transaction starts over
		sd.reset()
		ord := tokensBefore(first, o.TokensPerUserMax)
		for i := first; i < last; i++ {
			uid := o.StartUserID + uint64(i)
			enabled := o.DisabledEvery == 0 || uid%uint64(o.DisabledEvery) != 0
			sd.users = append(sd.users, uid, enabled)
			if len(sd.users) == 2*seedRowsPerInsert {
				n, err := sd.flushUsers(ctx, tx)
				if err != nil {
					return err
				}
				users += n
			}
			for n := 1; n <= 1+i%o.TokensPerUserMax; n++ {
				ord++
				dead := o.DeadEvery > 0 && ord%uint64(o.DeadEvery) == 0
				invalid := o.InvalidatedEvery > 0 && ord%uint64(o.InvalidatedEvery) == 0
				sd.addToken(uid, n, dead, invalid)
				if len(sd.tokens) == seedRowsPerInsert {
					c, err := sd.flushTokens(ctx, tx)
					if err != nil {
						return err
					}
					tokens += c
				}
			}
		}
		n, err := sd.flushUsers(ctx, tx)
		if err != nil {
			return err
		}
		users += n
		c, err := sd.flushTokens(ctx, tx)
		if err != nil {
			return err
		}
		tokens += c
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return users, tokens, nil
}

// tokensBefore is how many tokens the users with index < i get: whole cycles
// of 1+2+...+perUserMax, plus the partial cycle.
func tokensBefore(i, perUserMax int) uint64 {
	q, r := uint64(i/perUserMax), uint64(i%perUserMax)
	m := uint64(perUserMax)
	return q*m*(m+1)/2 + r*(r+1)/2
}

// seeder holds the rows of the pending multi-row INSERTs and the argument
// buffers, reused across statements.
type seeder struct {
	now    time.Time
	opts   SeedOptions
	users  []any // id, push_enabled per row
	tokens []seedToken
	names  []string // tokens' names, for the existence check
	args   []any
	exist  map[string]struct{}
}

type seedToken struct {
	userID  uint64
	n       int
	name    string
	invalid bool
}

// seedPlatform spreads seeded tokens over the three FCM client platforms.
func seedPlatform(n int) string {
	switch n % 3 {
	case 1:
		return "android"
	case 2:
		return "ios"
	default:
		return "web"
	}
}

func (sd *seeder) reset() {
	sd.users = sd.users[:0]
	sd.tokens = sd.tokens[:0]
}

func (sd *seeder) addToken(uid uint64, n int, dead, invalid bool) {
	sd.tokens = append(sd.tokens, seedToken{userID: uid, n: n, name: SeedTokenName(uid, n, dead), invalid: invalid})
}

func (sd *seeder) flushUsers(ctx context.Context, tx *sql.Tx) (int64, error) {
	if len(sd.users) == 0 {
		return 0, nil
	}
	// Duplicate users are cheap for INSERT IGNORE: the primary key catches them.
	q := "INSERT IGNORE INTO users (id, push_enabled) VALUES " + sqldb.Placeholders(len(sd.users)/2, 2)
	n, err := execCount(ctx, tx, q, sd.users)
	if err != nil {
		return 0, fmt.Errorf("seed users: %w", err)
	}
	sd.users = sd.users[:0]
	return n, nil
}

func (sd *seeder) flushTokens(ctx context.Context, tx *sql.Tx) (int64, error) {
	if len(sd.tokens) == 0 {
		return 0, nil
	}
	defer func() { sd.tokens = sd.tokens[:0] }()

	// Duplicate tokens are not cheap for INSERT IGNORE: InnoDB writes the row
	// into the primary key before the unique token key rejects it, then undoes
	// it; re-seeding a million tokens took 40 s that way. So batches that
	// overlap existing tokens (probed by their first and last name: batches
	// are contiguous runs of the deterministic sequence) are filtered first.
	// A fresh seed pays one two-row probe per batch.
	clear(sd.exist)
	if sd.exist == nil {
		sd.exist = make(map[string]struct{})
	}
	if err := sd.existing(ctx, tx, sd.tokens[0].name, sd.tokens[len(sd.tokens)-1].name); err != nil {
		return 0, err
	}
	if len(sd.exist) > 0 {
		sd.names = sd.names[:0]
		for _, t := range sd.tokens {
			sd.names = append(sd.names, t.name)
		}
		if err := sd.existing(ctx, tx, sd.names...); err != nil {
			return 0, err
		}
	}

	sd.args = sd.args[:0]
	for _, t := range sd.tokens {
		if _, ok := sd.exist[t.name]; ok {
			continue
		}
		var at, reason any
		if t.invalid {
			at, reason = sd.now, seedReason
		}
		sd.args = append(sd.args, t.userID, t.name, seedPlatform(t.n), at, reason)
	}
	if len(sd.args) == 0 {
		return 0, nil
	}
	// Still IGNORE: a concurrent seeder may have inserted some since.
	q := "INSERT IGNORE INTO device_tokens (user_id, token, platform, invalidated_at, invalid_reason) VALUES " +
		sqldb.Placeholders(len(sd.args)/5, 5)
	n, err := execCount(ctx, tx, q, sd.args)
	if err != nil {
		return 0, fmt.Errorf("seed tokens: %w", err)
	}
	return n, nil
}

// existing adds those of names that are stored tokens to sd.exist.
func (sd *seeder) existing(ctx context.Context, tx *sql.Tx, names ...string) error {
	q, args, err := sqlx.In("SELECT token FROM device_tokens WHERE token IN (?)", names)
	if err != nil {
		return fmt.Errorf("seed tokens: %w", err)
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("seed tokens: existing: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return fmt.Errorf("seed tokens: existing: %w", err)
		}
		sd.exist[name] = struct{}{}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("seed tokens: existing: %w", err)
	}
	return nil
}

func execCount(ctx context.Context, tx *sql.Tx, q string, args []any) (int64, error) {
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
