package app

import (
	"context"
	"fmt"

	"pushfan/config"
	"pushfan/engagement"
	"pushfan/repository"
)

// eventKeys are the keys that sign and verify event tokens:
// PUSHFAN_EVENT_KEYS when set, else the key pushfan generated and keeps in
// the database (the first replica to start makes it; the others read it).
// Stored keys verify in either case: a deployment that moves to its own
// keys keeps the tokens it already sent.
func eventKeys(ctx context.Context, cfg config.Config, store *repository.Store) (*engagement.Keys, error) {
	parsed, err := config.ParseEventKeys(cfg.Events.Keys)
	if err != nil {
		return nil, fmt.Errorf("PUSHFAN_EVENT_KEYS: %w", err)
	}
	var keys []engagement.Key
	given := map[string]bool{}
	for _, k := range parsed {
		keys = append(keys, engagement.Key{ID: k.ID, Secret: []byte(k.Secret)})
		given[k.ID] = true
	}
	c, cancel := context.WithTimeout(ctx, cfg.DB.Timeout)
	defer cancel()
	stored, err := store.EventKeys(c, len(keys) == 0)
	if err != nil {
		return nil, err
	}
	for _, k := range stored {
		if !given[k.ID] {
			keys = append(keys, engagement.Key{ID: k.ID, Secret: k.Secret})
		}
	}
	k, err := engagement.NewKeys(keys)
	if err != nil {
		return nil, fmt.Errorf("event keys: %w", err)
	}
	return k, nil
}
