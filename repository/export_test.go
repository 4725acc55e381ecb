package repository

import "github.com/jmoiron/sqlx"

// DB gives this package's tests the pool under s, for fixtures the Store
// has no method for. It exists only in test builds.
func (s *Store) DB() *sqlx.DB { return s.db }
