package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"pushfan/model"
)

// SaveOIDCState stores a sign-in that went to the OIDC provider, and first
// drops a batch of expired ones (abandoned sign-ins), as CreateSession
// does for sessions.
func (s *Store) SaveOIDCState(ctx context.Context, st model.OIDCState) error {
	if _, err := s.db.ExecContext(ctx, "DELETE FROM oidc_states WHERE expires_at < UTC_TIMESTAMP(6) LIMIT 1000"); err != nil {
		return fmt.Errorf("drop expired oidc states: %w", err)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO oidc_states (state_hash, browser_hash, nonce, verifier, expires_at) VALUES (?, ?, ?, ?, ?)`,
		st.StateHash[:], st.BrowserHash[:], st.Nonce, st.Verifier, st.ExpiresAt.UTC())
	if err != nil {
		return fmt.Errorf("save oidc state: %w", err)
	}
	return nil
}

// TakeOIDCState returns the unexpired sign-in whose state hashes to
// stateHash and deletes it. Of two callbacks with one state (a replay, on
// any replica) only the one whose DELETE removed the row finds it: both
// may read it, one deletes it. found is false for an unknown, taken or
// expired state.
func (s *Store) TakeOIDCState(ctx context.Context, stateHash [32]byte) (st model.OIDCState, found bool, err error) {
	st = model.OIDCState{StateHash: stateHash}
	var browser []byte
	err = s.db.QueryRowContext(ctx, `SELECT browser_hash, nonce, verifier, expires_at FROM oidc_states
		WHERE state_hash = ? AND expires_at > UTC_TIMESTAMP(6)`, stateHash[:]).Scan(&browser, &st.Nonce, &st.Verifier, &st.ExpiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return model.OIDCState{}, false, nil
	}
	if err != nil {
		return model.OIDCState{}, false, fmt.Errorf("read oidc state: %w", err)
	}
	copy(st.BrowserHash[:], browser)
	res, err := s.db.ExecContext(ctx, "DELETE FROM oidc_states WHERE state_hash = ?", stateHash[:])
	if err != nil {
		return model.OIDCState{}, false, fmt.Errorf("take oidc state: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return model.OIDCState{}, false, err
	}
	return st, true, nil
}
