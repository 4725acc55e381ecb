package server

import (
	"context"

	"github.com/labstack/echo/v4"

	"pushfan/model"
	"pushfan/server/keys"
)

// Keys are the API keys kept in the database (apikey.Keys): the routes of
// package server/keys, and the admin realm's bearer auth when no
// environment token matches.
type Keys = keys.Checker

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
	k, ok, refusal, err := keys.Authenticate(ctx, ts.keys, token)
	if !ok {
		return nil, refusal, err
	}
	return &Principal{Actor: k.Actor(), Role: k.Role, Apps: k.Apps}, "", nil
}

// callerActor is who the request acts for (the zero Actor for none).
func callerActor(c echo.Context) model.Actor {
	if p := caller(c); p != nil {
		return p.Actor
	}
	return model.Actor{}
}
