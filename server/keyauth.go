package server

import (
	"context"
	"errors"
	"time"

	"pushfan/apikey"
	"pushfan/model"
	"pushfan/server/keys"
)

// Keys are the API keys kept in the database (apikey.Keys): the routes of
// package server/keys, and Check, which the admin realm's bearer auth
// asks when no environment token matches.
type Keys interface {
	keys.Domain
	Check(ctx context.Context, secret string) (apikey.Key, error)
}

// principal is who token is: an environment token of ts, else one of its
// API keys. A token that is neither answers a nil principal and the 401's
// message (refusal); err is only a failed lookup (the database's).
func (ts tokenSet) principal(ctx context.Context, token string) (p *Principal, refusal string, err error) {
	if t := ts.match(token); t != nil {
		return t.principal(), "", nil
	}
	if ts.keys == nil {
		return nil, "the bearer token is not valid", nil
	}
	k, err := ts.keys.Check(ctx, token)
	switch {
	case errors.Is(err, apikey.ErrUnknown):
		return nil, "the bearer token is not valid", nil
	// Which key and when: the caller holds its secret, so this tells
	// them nothing new, and tells them what to do.
	case errors.Is(err, apikey.ErrExpired):
		return nil, "the API key " + k.ID + " (" + k.Name + ") expired at " + k.ExpiresAt.Format(time.RFC3339) + "; ask an admin for a new key", nil
	case errors.Is(err, apikey.ErrRevoked):
		return nil, "the API key " + k.ID + " (" + k.Name + ") was revoked at " + k.RevokedAt.Format(time.RFC3339) + "; ask an admin for a new key", nil
	case err != nil:
		return nil, "", err
	}
	return &Principal{Actor: k.Actor(), Role: k.Role, Apps: k.Apps}, "", nil
}

// callerActor is who the request acts for (the zero Actor for none).
func callerActor(c interface{ Get(string) any }) model.Actor {
	if p, _ := c.Get(principalKey).(*Principal); p != nil {
		return p.Actor
	}
	return model.Actor{}
}
