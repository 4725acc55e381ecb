package apikey

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"pushfan/internal/platform/sqldb"
	"pushfan/model"
)

// Options tune the keys; zero values take the defaults.
type Options struct {
	// Apps are the configured apps' names: a key may name only these.
	Apps []string
	// DBTimeout bounds every statement (default 5 s).
	DBTimeout time.Duration
	// CacheTTL is how long a key's lookup is trusted (default 1 s): a
	// revocation reaches every instance within it and a lookup's time.
	CacheTTL time.Duration
	// UsedEvery is how often last_used_at is written per key per instance
	// at most (default 1 min).
	UsedEvery time.Duration
	// OnWrite, when set, runs inside each write's transaction (action
	// key.create or key.revoke, the key, who): an error rolls the write
	// back. The audit trail joins the writes here.
	OnWrite func(ctx context.Context, tx *sql.Tx, action string, k Key, by model.Actor) error
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Keys creates, lists, revokes and checks the API keys. It is safe for
// concurrent use.
type Keys struct {
	db    *sql.DB
	log   *slog.Logger
	opts  Options
	cache *cache
}

// New returns the keys of db (migrated).
func New(db *sql.DB, o Options, log *slog.Logger) *Keys {
	if o.DBTimeout <= 0 {
		o.DBTimeout = 5 * time.Second
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = time.Second
	}
	if o.UsedEvery <= 0 {
		o.UsedEvery = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Keys{db: db, log: sqldb.OrDiscard(log), opts: o, cache: newCache()}
}

// The actions OnWrite is called with.
const (
	ActionCreate = "key.create"
	ActionRevoke = "key.revoke"
)

func (k *Keys) now() time.Time { return k.opts.Now().UTC().Truncate(time.Microsecond) }

// Create checks sp (a *FieldError names the first bad field) and stores a
// new key: the answer carries its secret, which nothing keeps.
func (k *Keys) Create(ctx context.Context, sp Spec) (Created, error) {
	v, err := check(sp, k.opts.Apps)
	if err != nil {
		return Created{}, err
	}
	secret, hash, err := newSecret()
	if err != nil {
		return Created{}, err
	}
	id, err := newID()
	if err != nil {
		return Created{}, err
	}
	now := k.now()
	key := Key{ID: id, Name: sp.Name, Role: v.role, Apps: sp.Apps, CreatedAt: now, CreatedBy: sqldb.ClampRunes(sp.By.Name, 128)}
	if v.expiresIn > 0 {
		exp := now.Add(v.expiresIn)
		key.ExpiresAt = &exp
	}
	var apps any // NULL: every app
	if sp.Apps != nil {
		raw, err := json.Marshal(sp.Apps)
		if err != nil {
			return Created{}, fmt.Errorf("encode apps: %w", err)
		}
		apps = string(raw)
	}
	var expires any
	if key.ExpiresAt != nil {
		expires = *key.ExpiresAt
	}
	ctx, cancel := context.WithTimeout(ctx, k.opts.DBTimeout)
	defer cancel()
	err = sqldb.InTx(ctx, k.db, k.log, "create API key", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO api_keys
			(id, name, role, apps, secret_hash, created_at, created_by_kind, created_by_id, created_by, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, key.Name, string(key.Role), apps, hash[:], now, string(sp.By.Kind), sqldb.ClampRunes(sp.By.ID, 255), key.CreatedBy, expires); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		if k.opts.OnWrite != nil {
			return k.opts.OnWrite(ctx, tx, ActionCreate, key, sp.By)
		}
		return nil
	})
	if err != nil {
		return Created{}, fmt.Errorf("API key %q: %w", sp.Name, err)
	}
	return Created{Key: key, Secret: secret}, nil
}

// keyColumns are a key's columns, in scanKey's order.
const keyColumns = "id, name, role, apps, created_at, created_by, expires_at, revoked_at, last_used_at"

func scanKey(row interface{ Scan(...any) error }) (Key, error) {
	var (
		key                     Key
		role                    string
		apps                    sql.NullString
		expires, revoked, lastU sql.NullTime
	)
	if err := row.Scan(&key.ID, &key.Name, &role, &apps, &key.CreatedAt, &key.CreatedBy, &expires, &revoked, &lastU); err != nil {
		return key, err
	}
	key.Role = model.Role(role)
	if apps.Valid {
		if err := json.Unmarshal([]byte(apps.String), &key.Apps); err != nil {
			return key, fmt.Errorf("key %s: decode apps: %w", key.ID, err)
		}
	}
	key.CreatedAt = key.CreatedAt.UTC()
	key.ExpiresAt, key.RevokedAt, key.LastUsedAt = utc(expires), utc(revoked), utc(lastU)
	return key, nil
}

func utc(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	u := t.Time.UTC()
	return &u
}

// List returns every key, the revoked ones included (their ids still
// name what they did), newest first.
func (k *Keys) List(ctx context.Context) ([]Key, error) {
	ctx, cancel := context.WithTimeout(ctx, k.opts.DBTimeout)
	defer cancel()
	rows, err := k.db.QueryContext(ctx, "SELECT "+keyColumns+" FROM api_keys ORDER BY created_at DESC, id")
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	defer rows.Close()
	out := []Key{}
	for rows.Next() {
		key, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list API keys: %w", err)
		}
		out = append(out, key)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	return out, nil
}

// Revoke revokes key id, by who: at once on this instance, and on the
// others once their cached lookup ages out (Options.CacheTTL). Revoking a
// revoked key changes nothing and is no error; ErrNotFound (wrapped) for
// an unknown id.
func (k *Keys) Revoke(ctx context.Context, id string, by model.Actor) (Key, error) {
	ctx, cancel := context.WithTimeout(ctx, k.opts.DBTimeout)
	defer cancel()
	var key Key
	err := sqldb.InTx(ctx, k.db, k.log, "revoke API key", func(tx *sql.Tx) error {
		var err error
		key, err = scanKey(tx.QueryRowContext(ctx, "SELECT "+keyColumns+" FROM api_keys WHERE id = ? FOR UPDATE", id))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if key.RevokedAt != nil {
			return nil
		}
		now := k.now()
		if _, err := tx.ExecContext(ctx, "UPDATE api_keys SET revoked_at = ? WHERE id = ?", now, id); err != nil {
			return fmt.Errorf("update: %w", err)
		}
		key.RevokedAt = &now
		if k.opts.OnWrite != nil {
			return k.opts.OnWrite(ctx, tx, ActionRevoke, key, by)
		}
		return nil
	})
	if err != nil {
		return Key{}, fmt.Errorf("API key %s: %w", id, err)
	}
	k.cache.forgetID(id)
	return key, nil
}
