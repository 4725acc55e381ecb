package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"pushfan/model"
)

// CreateSession stores a console session, and first drops a batch of
// expired ones: sign-ins are rare, so this keeps the table small without a
// sweeper of its own.
func (s *Store) CreateSession(ctx context.Context, sess model.Session) error {
	if _, err := s.db.ExecContext(ctx, "DELETE FROM console_sessions WHERE expires_at < UTC_TIMESTAMP(6) LIMIT 1000"); err != nil {
		return fmt.Errorf("drop expired sessions: %w", err)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO console_sessions (id_hash, token_hash, csrf_token, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		sess.IDHash[:], sess.TokenHash[:], sess.CSRFToken, sess.CreatedAt.UTC(), sess.ExpiresAt.UTC())
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// Session returns the unexpired session whose id hashes to idHash; found
// is false for an unknown or expired one.
func (s *Store) Session(ctx context.Context, idHash [32]byte) (sess model.Session, found bool, err error) {
	sess = model.Session{IDHash: idHash}
	var token []byte
	err = s.db.QueryRowContext(ctx, `SELECT token_hash, csrf_token, created_at, expires_at FROM console_sessions
		WHERE id_hash = ? AND expires_at > UTC_TIMESTAMP(6)`, idHash[:]).Scan(&token, &sess.CSRFToken, &sess.CreatedAt, &sess.ExpiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return model.Session{}, false, nil
	}
	if err != nil {
		return model.Session{}, false, fmt.Errorf("session: %w", err)
	}
	copy(sess.TokenHash[:], token)
	return sess, true, nil
}

// DeleteSession ends a session (sign-out); ending an unknown one is not an
// error.
func (s *Store) DeleteSession(ctx context.Context, idHash [32]byte) error {
	if _, err := s.db.ExecContext(ctx, "DELETE FROM console_sessions WHERE id_hash = ?", idHash[:]); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}
