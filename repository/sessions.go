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
// sweeper of its own. A person's session stores the person and their role
// and no token; a token's stores the token's hash only.
func (s *Store) CreateSession(ctx context.Context, sess model.Session) error {
	if _, err := s.db.ExecContext(ctx, "DELETE FROM console_sessions WHERE expires_at < UTC_TIMESTAMP(6) LIMIT 1000"); err != nil {
		return fmt.Errorf("drop expired sessions: %w", err)
	}
	var token any = sess.TokenHash[:]
	kind := string(model.ActorToken)
	var actorID, actorName, role any
	if p := sess.Person; p != nil {
		token, kind, actorID, actorName, role = nil, string(p.Kind), p.ID, p.Name, string(sess.Role)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO console_sessions (id_hash, token_hash, csrf_token, created_at, expires_at, actor_kind, actor_id, actor_name, role)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sess.IDHash[:], token, sess.CSRFToken, sess.CreatedAt.UTC(), sess.ExpiresAt.UTC(), kind, actorID, actorName, role)
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
	var kind string
	var actorID, actorName, role sql.NullString
	err = s.db.QueryRowContext(ctx, `SELECT token_hash, csrf_token, created_at, expires_at, actor_kind, actor_id, actor_name, role FROM console_sessions
		WHERE id_hash = ? AND expires_at > UTC_TIMESTAMP(6)`, idHash[:]).Scan(&token, &sess.CSRFToken, &sess.CreatedAt, &sess.ExpiresAt, &kind, &actorID, &actorName, &role)
	if errors.Is(err, sql.ErrNoRows) {
		return model.Session{}, false, nil
	}
	if err != nil {
		return model.Session{}, false, fmt.Errorf("session: %w", err)
	}
	copy(sess.TokenHash[:], token)
	if model.ActorKind(kind) == model.ActorPerson {
		sess.Person = &model.Actor{Kind: model.ActorPerson, ID: actorID.String, Name: actorName.String}
		sess.Role = model.Role(role.String)
	}
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
