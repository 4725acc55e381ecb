package main

import (
	"context"
	"database/sql"
	"fmt"
)

// tableSize is one table's rows and bytes (information_schema estimates).
type tableSize struct {
	Rows       int64 `json:"rows"`
	DataBytes  int64 `json:"data_bytes"`
	IndexBytes int64 `json:"index_bytes"`
}

// dbCounters are the server status counters the capacity model uses.
var dbCounters = []string{"Questions", "Com_select", "Com_insert", "Com_update", "Com_delete", "Com_commit",
	"Handler_read_key", "Handler_read_next", "Handler_read_rnd_next", "Handler_write", "Handler_update", "Handler_delete"}

func globalStatus(ctx context.Context, db *sql.DB) (map[string]float64, error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	want := map[string]bool{}
	for _, c := range dbCounters {
		want[c] = true
	}
	out := map[string]float64{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		if want[k] {
			var f float64
			fmt.Sscan(v, &f)
			out[k] = f
		}
	}
	return out, rows.Err()
}

func tableSizes(ctx context.Context, db *sql.DB) (map[string]tableSize, error) {
	rows, err := db.QueryContext(ctx, `SELECT TABLE_NAME, COALESCE(TABLE_ROWS, 0), COALESCE(DATA_LENGTH, 0), COALESCE(INDEX_LENGTH, 0)
		FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()
		AND TABLE_NAME IN ('broadcasts', 'broadcast_chunks', 'broadcast_failures', 'device_tokens', 'users')`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]tableSize{}
	for rows.Next() {
		var name string
		var t tableSize
		if err := rows.Scan(&name, &t.Rows, &t.DataBytes, &t.IndexBytes); err != nil {
			return nil, err
		}
		out[name] = t
	}
	return out, rows.Err()
}

// fitBufferPool sizes MariaDB's buffer pool to hold db's tables with a
// quarter to spare, unless SCALE_BUFFER_POOL=keep, and returns what puts
// the old size back. A deployment of this size needs that (docs/
// CAPACITY.md): MariaDB's default of 128 MB turns every plan step and page
// into disk reads, and the run would measure the disk.
func (b *bench) fitBufferPool(ctx context.Context, db benchDB, sr *scaleReport) (restore func(), err error) {
	conn, err := sql.Open("mysql", db.dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var have, tables int64
	if err := conn.QueryRowContext(ctx, "SELECT @@innodb_buffer_pool_size").Scan(&have); err != nil {
		return nil, fmt.Errorf("buffer pool size: %w", err)
	}
	sr.BufferPoolMB = float64(have) / (1 << 20)
	if err := conn.QueryRowContext(ctx, `SELECT COALESCE(SUM(DATA_LENGTH + INDEX_LENGTH), 0) FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = DATABASE()`).Scan(&tables); err != nil {
		return nil, fmt.Errorf("table sizes: %w", err)
	}
	const gb = 1 << 30
	want := (tables*5/4 + gb - 1) / gb * gb
	if !b.o.scalePool || have >= want {
		b.logf("buffer pool %d MB, the tables %d MB", have>>20, tables>>20)
		return func() {}, nil
	}
	if _, err := conn.ExecContext(ctx, "SET GLOBAL innodb_buffer_pool_size = ?", want); err != nil {
		return nil, fmt.Errorf("raise the buffer pool to %d MB: %w", want>>20, err)
	}
	sr.RaisedFromMB, sr.BufferPoolMB = sr.BufferPoolMB, float64(want)/(1<<20)
	b.logf("buffer pool raised from %d MB to %d MB for the run, to hold the tables' %d MB (SCALE_BUFFER_POOL=keep measures %d MB)",
		have>>20, want>>20, tables>>20, have>>20)
	return func() {
		conn, err := sql.Open("mysql", db.dsn)
		if err == nil {
			defer conn.Close()
			_, err = conn.ExecContext(context.Background(), "SET GLOBAL innodb_buffer_pool_size = ?", have)
		}
		if err != nil {
			b.logf("could not put the buffer pool back to %d MB: %v", have>>20, err)
		}
	}, nil
}
