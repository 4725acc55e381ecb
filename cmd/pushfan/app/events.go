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
func eventKeys(ctx context.Context, cfg config.Config, store *repository.Store) (*engagement.Keys, error) {
	parsed, err := config.ParseEventKeys(cfg.Events.Keys)
	if err != nil {
		return nil, fmt.Errorf("PUSHFAN_EVENT_KEYS: %w", err)
	}
	var keys []engagement.Key
	for _, k := range parsed {
		keys = append(keys, engagement.Key{ID: k.ID, Secret: []byte(k.Secret)})
	}
	if len(keys) == 0 {
		c, cancel := context.WithTimeout(ctx, cfg.DB.Timeout)
		defer cancel()
		stored, err := store.EventKeys(c)
		if err != nil {
			return nil, err
		}
		for _, k := range stored {
			keys = append(keys, engagement.Key{ID: k.ID, Secret: k.Secret})
		}
	}
	k, err := engagement.NewKeys(keys)
	if err != nil {
		return nil, fmt.Errorf("event keys: %w", err)
	}
	return k, nil
}
