package app

import (
	"context"

	"github.com/jmoiron/sqlx"

	"pushfan/config"
	"pushfan/repository"
)

// CheckSchema compiles the configuration's schema mapping and checks it
// against the database (tables, columns, conditions, on_dead), as start-up
// and `pushfan config check` both do: a mistyped column stops start-up
// with the key named, before any broadcast could fail on it.
func CheckSchema(ctx context.Context, cfg config.Config, pool *sqlx.DB) (*repository.Schema, error) {
	schema, err := repository.CompileSchema(cfg.Schema)
	if err != nil {
		return nil, err // each problem already names its schema. key
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.DB.Timeout)
	defer cancel()
	if err := schema.Check(cctx, pool); err != nil {
		return nil, err // each problem already names its schema. key
	}
	return schema, nil
}
