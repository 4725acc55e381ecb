package app

import (
	"context"
	"fmt"

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
	if schema, err = schema.WithStaleAfter(cfg.Engine.StaleAfter); err != nil {
		return nil, err // names schema.tokens.last_seen
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.DB.Timeout)
	defer cancel()
	if err := schema.Check(cctx, pool); err != nil {
		return nil, err // each problem already names its schema. key
	}
	if err := schema.CheckSegmentFields(cctx, pool); err != nil {
		return nil, err // each problem names its schema. key
	}
	if err := checkConsents(cctx, cfg, schema, pool); err != nil {
		return nil, err
	}
	return schema, nil
}

// checkConsents runs every category's consent conditions once on the
// schema's users table: a mistyped column stops start-up with the
// category named, before a broadcast's plan could fail on it.
func checkConsents(ctx context.Context, cfg config.Config, schema *repository.Schema, pool *sqlx.DB) error {
	for _, c := range cfg.CategoryList() {
		if err := schema.CheckConsent(ctx, pool, c); err != nil {
			return err
		}
	}
	return nil
}

// CheckAppSchemas compiles and checks the schema of every app with tables
// of its own (config.App.Schema), keyed by app, each already limited to
// its app's tokens (repository.Schema.ForApp).
func CheckAppSchemas(ctx context.Context, cfg config.Config, pool *sqlx.DB) (map[string]*repository.Schema, error) {
	out := map[string]*repository.Schema{}
	for _, a := range cfg.AppList() {
		if a.Schema == nil {
			continue
		}
		schema, err := repository.CompileSchema(*a.Schema)
		if err == nil {
			schema, err = schema.WithStaleAfter(cfg.Engine.StaleAfter)
		}
		if err != nil {
			return nil, fmt.Errorf("apps.%s.%w", a.Name, err)
		}
		cctx, cancel := context.WithTimeout(ctx, cfg.DB.Timeout)
		err = schema.Check(cctx, pool)
		if err == nil {
			err = schema.CheckSegmentFields(cctx, pool)
		}
		if err == nil {
			err = checkConsents(cctx, cfg, schema, pool)
		}
		cancel()
		if err != nil {
			return nil, fmt.Errorf("apps.%s: %w", a.Name, err)
		}
		out[a.Name] = schema.ForApp(a.Name)
	}
	return out, nil
}
