package broadcast

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"pushfan/model"
	"pushfan/repository"
)

// requestHash digests what a request asks for, so a reused Idempotency-Key
// with a different request is told apart from a retry.
func requestHash(in Request) string {
	raw, _ := json.Marshal(struct {
		M  model.Message
		A  model.Audience
		D  bool
		ID bool
		S  *time.Time
		C  string
		R  float64
		O  time.Duration
		H  bool   `json:",omitempty"` // omitted when false: older keys keep their hash
		P  string `json:",omitempty"` // the app; omitted for the default app, so older keys keep their hash
	}{in.Message, in.Audience, in.DryRun, in.InvalidateOnDryRun, in.SendAt, in.Class, in.MaxRate, in.DeliverOver, in.Hold, appUnlessDefault(in.App)})
	// The frequency cap is left out: it is the deployment's as much as
	// the request's, and a retry across a change of PUSHFAN_FREQUENCY_CAP
	// is the same request.
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// appUnlessDefault is app, or "" for the default app (the request hash
// leaves it out, so a key stored before apps existed keeps its hash).
func appUnlessDefault(app string) string {
	if app == model.DefaultApp {
		return ""
	}
	return app
}

// existing is the broadcast stored under req's key, nil when none is, or
// ErrIdempotencyConflict when the key was used for another request.
func (s *Service) existing(ctx context.Context, req Request) (*model.Broadcast, error) {
	dbctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	b, err := s.store.FindByIdempotencyKey(dbctx, req.IdempotencyKey)
	if errors.Is(err, repository.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if b.RequestHash != req.RequestHash {
		return nil, fmt.Errorf("key %q belongs to broadcast %d: %w", req.IdempotencyKey, b.ID, ErrIdempotencyConflict)
	}
	return b, nil
}
