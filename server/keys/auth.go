package keys

import (
	"context"
	"errors"
	"time"

	"pushfan/apikey"
)

// Checker is the API keys as the bearer auth and these routes use them:
// apikey.Keys.
type Checker interface {
	Domain
	Check(ctx context.Context, secret string) (apikey.Key, error)
}

// Authenticate is the key whose secret token is, asked of ks when no
// environment token matched. A token that is no usable key answers ok
// false and the 401's message (refusal); err is only a failed lookup (the
// database's), which is not the caller's failure.
func Authenticate(ctx context.Context, ks Checker, token string) (k apikey.Key, ok bool, refusal string, err error) {
	k, err = ks.Check(ctx, token)
	switch {
	case err == nil:
		return k, true, "", nil
	case errors.Is(err, apikey.ErrUnknown):
		return k, false, "the bearer token is not valid", nil
	// Which key and when: the caller holds its secret, so this tells
	// them nothing new, and tells them what to do.
	case errors.Is(err, apikey.ErrExpired):
		return k, false, "the API key " + k.ID + " (" + k.Name + ") expired at " + k.ExpiresAt.Format(time.RFC3339) + "; ask an admin for a new key", nil
	case errors.Is(err, apikey.ErrRevoked):
		return k, false, "the API key " + k.ID + " (" + k.Name + ") was revoked at " + k.RevokedAt.Format(time.RFC3339) + "; ask an admin for a new key", nil
	}
	return k, false, "", err
}
