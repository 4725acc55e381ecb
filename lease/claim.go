package lease

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"pushfan/internal/platform/sqldb"
	"pushfan/lease/codec"
	"pushfan/repository"
)

// Chunk statuses.
const (
	StatusPlanning = "planning" // being filled by its broadcast's plan; never claimed
	StatusWaiting  = "waiting"  // not due before not_before; PromoteWaiting makes it pending
	StatusPending  = "pending"
	StatusLeased   = "leased"
	StatusDone     = "done"
)

// Errors callers act on.
var (
	// ErrLost: the chunk is no longer this claim's (another claim fenced it
	// off, or a cancel closed it). The caller stops and stores nothing more.
	ErrLost = errors.New("chunk lease lost")
	// ErrNotFound: no broadcast with that id.
	ErrNotFound = errors.New("broadcast not found")
	// ErrFinished: the broadcast already ended.
	ErrFinished = errors.New("broadcast already finished")
)

// Store runs the protocol on one MySQL database. It is safe for concurrent
// use.
type Store struct {
	db     *sql.DB
	log    *slog.Logger
	events Events // the transitions' events (SetEvents); nil: none
	// schema is the schema this release was built for, checked against
	// the schema fence by every transition (schema.go).
	schema       int64
	outdatedFn   func(fence, schema int64) // OnOutdated; nil: none
	outdatedOnce sync.Once
	keepNone     bool // KeepNoOutcomes
}

// New returns a Store on db (the same database the broadcasts live in),
// for a release built for this build's schema (repository.SchemaVersion).
func New(db *sql.DB, log *slog.Logger) *Store {
	return &Store{db: db, log: sqldb.OrDiscard(log), schema: repository.SchemaVersion()}
}

// Key names one chunk.
type Key struct {
	BroadcastID uint64
	Seq         int
}

// Plan is one chunk to create: the cursor range (Lo, Hi] and its number
// of targets, as the plan counted them. Seq is its number in the
// broadcast (InsertChunks numbers a whole plan from 0; a plan step names
// its chunks).
type Plan struct {
	Seq     int
	Lo, Hi  uint64
	Targets int64
	// NotBefore, when set, keeps the chunk waiting until then (its
	// targets' local send time, or their quiet window's end).
	NotBefore *time.Time
	// IDs, when set, are the chunk's targets, fixed by the plan (local
	// time: each target in the chunk of its due instant); nil reads the
	// audience's range (Lo, Hi].
	IDs []uint64
}

// Class ranks chunk claims: transactional chunks are claimed first. An
// instance runs each class in slots of its own (see broadcast's dispatch):
// paced chunks run long and slowly, and must not hold the slots that bulk
// broadcasts run in.
type Class uint8

const (
	Transactional Class = 0 // urgent sends
	Bulk          Class = 1
	Paced         Class = 2 // bulk with a pace (max_rate, deliver_over)
)

// String names the class as the API does.
func (c Class) String() string {
	switch c {
	case Transactional:
		return "transactional"
	case Paced:
		return "paced"
	}
	return "bulk"
}

// ClassOf is the chunk class of a broadcast of the API's class
// (transactional or bulk), paced or not.
func ClassOf(class string, paced bool) Class {
	switch {
	case class == "transactional":
		return Transactional
	case paced:
		return Paced
	}
	return Bulk
}

// InsertChunks stores broadcast id's whole plan inside tx, the transaction
// that stores the broadcast, so no broadcast exists without the work that
// completes it: the chunks, numbered from 0, and the broadcast's targeted,
// open chunk and waiting counts. The plan is complete (planned_at). See
// Step for a plan stored in steps.
func InsertChunks(ctx context.Context, tx *sql.Tx, id uint64, class Class, plans []Plan) error {
	st := Step{Seq: len(plans)}
	for i, p := range plans {
		p.Seq = i
		st.Chunks = append(st.Chunks, p)
		st.Added += p.Targets
		st.Cursor = max(st.Cursor, p.Hi)
	}
	return StorePlan(ctx, tx, id, class, st)
}

// StorePlan stores broadcast id's whole plan, made at once inside tx, the
// transaction that stores the broadcast (a bounded audience): its chunks
// and counts, and the plan complete.
func StorePlan(ctx context.Context, tx *sql.Tx, id uint64, class Class, st Step) error {
	st.Done, st.Building = true, nil
	return writeStep(ctx, tx, id, class, 0, st, "max_token_id = ?, plan_width = ?, plan_cursor = ?, plan_seq = ?",
		st.MaxCursor, st.Width, st.Cursor, st.Seq)
}

// Claim is a chunk leased to this instance, as stored when it was claimed
// and after each of its checkpoints.
type Claim struct {
	Key
	Epoch   uint64 // fencing token of this claim
	Lo, Hi  uint64
	Cursor  uint64  // every target at or below it has a stored outcome
	Done    []Range // targets above Cursor with a stored outcome
	CkptSeq uint64  // the last checkpoint applied
	// Takeover: the chunk was claimed from an expired lease (its holder
	// died or stalled), not from the pending queue.
	Takeover bool
	Class    Class
	// IDs are the chunk's targets when the plan fixed them (Plan.IDs);
	// nil reads the audience's range.
	IDs []uint64
	// Zones is the zone group a chunk planned before migration 00014
	// reads (a JSON model.ZoneFilter); "" for every other chunk.
	Zones string
}

// ClaimOptions says who claims and what to leave alone.
type ClaimOptions struct {
	Owner string
	Lease time.Duration
	// Running are the chunks this instance is running now: an expired
	// lease of one of them (a database stall longer than the lease) is not
	// claimed again by the instance already running it.
	Running []Key
	// Skip are broadcasts this instance cannot run now (see HandBack).
	Skip []uint64
	// Classes are the classes the instance has a free slot for (nil: any).
	Classes []Class
	// App claims a chunk of that app's broadcasts only ("": any app). An
	// instance runs each app's chunks in slots of its own.
	App string
}

// Claim leases one chunk to o.Owner: a chunk whose lease expired first (a
// started broadcast whose holder died), else a pending one: transactional
// before bulk, and within a class by queue position (vseq), so that
// broadcasts of a class take turns. It returns nil when there is nothing to
// claim. SKIP LOCKED lets instances
// claim concurrently without waiting on each other; lease times use the
// database clock, so instances' clocks need not agree.
//
// An expired lease of o.Owner itself is taken too, unless the chunk is in
// o.Running: an instance restarted under a pinned id resumes its own
// chunks once their leases expire.
//
// If the claim's commit outcome is unknown (the connection dropped), Claim
// looks the claim up by its token before reporting the error, so a claim
// that did commit is not stranded until its lease expires.
func (s *Store) Claim(ctx context.Context, o ClaimOptions) (*Claim, error) {
	token := NewToken()
	var c *Claim
	err := s.inTx(ctx, "claim chunk", func(tx *sql.Tx) error {
		var err error
		c, err = s.claimIn(ctx, tx, o, token)
		return err
	})
	if err == nil || ctx.Err() != nil || errors.Is(err, ErrOutdated) {
		return c, err
	}
	found, lookErr := s.findClaim(ctx, token)
	if lookErr == nil && found != nil {
		s.log.Info("a claim whose commit answer was lost did commit; keeping it", "broadcast_id", found.BroadcastID, "chunk", found.Seq)
		return found, nil
	}
	return nil, err
}

func (s *Store) claimIn(ctx context.Context, tx *sql.Tx, o ClaimOptions, token string) (*Claim, error) {
	var skip, running, class string
	var skipArgs, runArgs []any
	// The app's condition comes first, as in both indexes: a range of one
	// app's chunks of the status.
	app := ""
	if o.App != "" {
		app = " AND app = ?"
		skipArgs = append(skipArgs, o.App)
	}
	if o.Classes != nil {
		if len(o.Classes) == 0 {
			return nil, nil
		}
		ranks := make([]string, len(o.Classes))
		for i, c := range o.Classes {
			ranks[i] = strconv.Itoa(int(c))
		}
		class = " AND class_rank IN (" + strings.Join(ranks, ",") + ")"
	}
	if len(o.Skip) > 0 {
		skip = " AND broadcast_id NOT IN (" + sqldb.InList(len(o.Skip)) + ")"
		for _, id := range o.Skip {
			skipArgs = append(skipArgs, id)
		}
	}
	if len(o.Running) > 0 {
		running = " AND (broadcast_id, seq) NOT IN (" + sqldb.Placeholders(len(o.Running), 2) + ")"
		for _, k := range o.Running {
			runArgs = append(runArgs, k.BroadcastID, k.Seq)
		}
	}
	// Expired leases first: they are started broadcasts whose holder died.
	// Two statements rather than one OR, so each is a range scan of its own
	// index, however many chunk rows other broadcasts have.
	c, err := scanClaim(tx.QueryRowContext(ctx, `SELECT `+claimCols+` FROM broadcast_chunks FORCE INDEX (idx_chunks_lease)
		WHERE status = 'leased'`+app+` AND lease_until < UTC_TIMESTAMP(6)`+class+skip+running+`
		ORDER BY lease_until LIMIT 1 FOR UPDATE SKIP LOCKED`, append(skipArgs, runArgs...)...))
	if errors.Is(err, sql.ErrNoRows) {
		c, err = scanClaim(tx.QueryRowContext(ctx, `SELECT `+claimCols+` FROM broadcast_chunks FORCE INDEX (idx_chunks_pending)
			WHERE status = 'pending'`+app+class+skip+`
			ORDER BY class_rank, vseq, broadcast_id LIMIT 1 FOR UPDATE SKIP LOCKED`, skipArgs...))
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("select: %w", err)
	}
	// fenced_epoch and takeovers are assigned before epoch and status:
	// MySQL evaluates SET left to right. fenced_epoch names the holder a
	// takeover fences off, whose sends a cancel's close may have to count
	// (fenced.go).
	if _, err := tx.ExecContext(ctx, `UPDATE broadcast_chunks SET fenced_epoch = IF(status = 'leased', epoch, fenced_epoch), epoch = epoch + 1,
			takeovers = takeovers + IF(status = 'leased', 1, 0), claims = claims + 1,
			status = 'leased', lease_owner = ?, lease_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, claim_token = ?
		WHERE broadcast_id = ? AND seq = ?`, o.Owner, o.Lease.Microseconds(), token, c.BroadcastID, c.Seq); err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	c.Epoch++
	started, err := tx.ExecContext(ctx, `UPDATE broadcasts SET status = 'running', started_at = COALESCE(started_at, UTC_TIMESTAMP(6))
		WHERE id = ? AND status IN ('queued', 'planning')`, c.BroadcastID)
	if err != nil {
		return nil, fmt.Errorf("start broadcast: %w", err)
	}
	if n, _ := started.RowsAffected(); n == 1 {
		if err := s.event(ctx, tx, EventStarted, c.BroadcastID); err != nil {
			return nil, err
		}
	}
	if err := loadIDs(ctx, tx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// findClaim returns the chunk leased under token, if that claim committed.
// The locking read waits for a commit still in progress on the server.
func (s *Store) findClaim(ctx context.Context, token string) (*Claim, error) {
	var c *Claim
	err := sqldb.InTx(ctx, s.db, s.log, "find claim", func(tx *sql.Tx) error {
		var err error
		c, err = scanClaim(tx.QueryRowContext(ctx, "SELECT "+claimCols+" FROM broadcast_chunks WHERE claim_token = ? AND status = 'leased' FOR UPDATE", token))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			c, err = nil, nil
		case err == nil:
			c.Takeover = false // unknown here; it only feeds a metric
			err = loadIDs(ctx, tx, c)
		}
		return err
	})
	return c, err
}

const claimCols = "broadcast_id, seq, lo_id, hi_id, cursor_id, done_ranges, epoch, ckpt_seq, status, class_rank, COALESCE(zones, '')"

func scanClaim(row *sql.Row) (*Claim, error) {
	var c Claim
	var done []byte
	var status string
	if err := row.Scan(&c.BroadcastID, &c.Seq, &c.Lo, &c.Hi, &c.Cursor, &done, &c.Epoch, &c.CkptSeq, &status, &c.Class, &c.Zones); err != nil {
		return nil, err
	}
	var err error
	if c.Done, err = codec.DecodeRanges(c.Cursor, done); err != nil {
		return nil, fmt.Errorf("chunk %d/%d: %w", c.BroadcastID, c.Seq, err)
	}
	c.Takeover = status == StatusLeased
	return &c, nil
}

// loadIDs reads a claimed chunk's fixed targets, apart from the claim's
// scan so that it never reads the list of a row it skips.
func loadIDs(ctx context.Context, tx *sql.Tx, c *Claim) error {
	var raw []byte
	if err := tx.QueryRowContext(ctx, "SELECT target_ids FROM broadcast_chunks WHERE broadcast_id = ? AND seq = ?", c.BroadcastID, c.Seq).Scan(&raw); err != nil {
		return fmt.Errorf("chunk %d/%d: read its targets: %w", c.BroadcastID, c.Seq, err)
	}
	ids, err := codec.DecodeIDs(c.Lo, raw)
	if err != nil {
		return fmt.Errorf("chunk %d/%d: %w", c.BroadcastID, c.Seq, err)
	}
	c.IDs = ids
	return nil
}

// NewToken returns 32 random hex characters naming one claim or finish
// attempt.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
