package fcmemu

import (
	"bufio"
	"encoding/json"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
)

// TokenCounts is what the emulator saw for one registration token.
type TokenCounts struct {
	// Accepted counts 2xx answers to real sends (not validate_only): messages "delivered".
	Accepted int64 `json:"accepted"`
	// Attempts counts every request that named the token, whatever the answer.
	Attempts int64 `json:"attempts"`
	// Validated counts 2xx answers to validate_only requests.
	Validated int64 `json:"validated"`
}

// tokenEntry is the live, lock-free counterpart of TokenCounts. The shard lock guards only the
// map; the counters are atomics so concurrent sends to one token never serialise on a mutex.
type tokenEntry struct {
	attempts  atomic.Int64
	accepted  atomic.Int64
	validated atomic.Int64
	// backoffUntil is the unix-nano instant announced by the last per-token 429 (Retry-After);
	// a request for this token arriving earlier did not honour it.
	backoffUntil atomic.Int64
}

func (e *tokenEntry) snapshot() TokenCounts {
	return TokenCounts{Accepted: e.accepted.Load(), Attempts: e.attempts.Load(), Validated: e.validated.Load()}
}

// numShards spreads tokens over independent locks. 64 is far more than the cores of the boxes
// this runs on, so two sends rarely meet on one lock, and still small enough to walk cheaply.
const numShards = 64

type tokenShard struct {
	mu sync.RWMutex
	m  map[string]*tokenEntry
	_  [64]byte // keep neighbouring shards' locks on separate cache lines
}

// tokenTable maps tokens to their counters, sharded by FNV-1a hash of the token.
type tokenTable struct {
	shards   [numShards]tokenShard
	distinct atomic.Int64
}

func newTokenTable() *tokenTable {
	t := &tokenTable{}
	for i := range t.shards {
		t.shards[i].m = make(map[string]*tokenEntry)
	}
	return t
}

// fnv32a hashes without allocating (hash/fnv needs a []byte copy of the string).
func fnv32a(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// entry returns the counters of token, creating them on first sight. The common case (token
// already known) takes only the shard's read lock.
func (t *tokenTable) entry(token string) *tokenEntry {
	s := &t.shards[fnv32a(token)%numShards]
	s.mu.RLock()
	e := s.m[token]
	s.mu.RUnlock()
	if e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e = s.m[token]; e == nil {
		e = &tokenEntry{}
		s.m[token] = e
		t.distinct.Add(1)
	}
	return e
}

// lookup returns the counters of token without creating them.
func (t *tokenTable) lookup(token string) TokenCounts {
	s := &t.shards[fnv32a(token)%numShards]
	s.mu.RLock()
	e := s.m[token]
	s.mu.RUnlock()
	if e == nil {
		return TokenCounts{}
	}
	return e.snapshot()
}

// reset forgets every token. Requests in flight keep updating the entries they already hold,
// which are no longer reachable: a reset during traffic loses those few updates by design.
func (t *tokenTable) reset() {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		s.m = make(map[string]*tokenEntry)
		s.mu.Unlock()
	}
	t.distinct.Store(0)
}

// tokenRow is one line of a counts snapshot.
type tokenRow struct {
	token string
	c     TokenCounts
}

// writeJSON streams {"tokens":{"<token>":{...},...},"token_count":N}. Each shard is copied
// under its read lock and written after releasing it, so a slow reader never blocks sends, and
// memory stays at one shard's worth of rows rather than the whole table. Token order is
// unspecified.
func (t *tokenTable) writeJSON(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	_, _ = bw.WriteString(`{"tokens":{`)
	var (
		rows  []tokenRow
		buf   []byte
		n     int64
		first = true
	)
	for i := range t.shards {
		s := &t.shards[i]
		rows = rows[:0]
		s.mu.RLock()
		for tok, e := range s.m {
			rows = append(rows, tokenRow{tok, e.snapshot()})
		}
		s.mu.RUnlock()
		for _, r := range rows {
			buf = buf[:0]
			if !first {
				buf = append(buf, ',')
			}
			first = false
			buf = appendTokenRow(buf, r.token, r.c)
			if _, err := bw.Write(buf); err != nil {
				return err
			}
			n++
		}
	}
	buf = append(buf[:0], `},"token_count":`...)
	buf = strconv.AppendInt(buf, n, 10)
	buf = append(buf, "}\n"...)
	if _, err := bw.Write(buf); err != nil {
		return err
	}
	return bw.Flush()
}

// appendTokenRow appends "token":{"accepted":a,"attempts":n,"validated":v} without reflection.
func appendTokenRow(buf []byte, token string, c TokenCounts) []byte {
	buf = appendJSONString(buf, token)
	buf = append(buf, `:{"accepted":`...)
	buf = strconv.AppendInt(buf, c.Accepted, 10)
	buf = append(buf, `,"attempts":`...)
	buf = strconv.AppendInt(buf, c.Attempts, 10)
	buf = append(buf, `,"validated":`...)
	buf = strconv.AppendInt(buf, c.Validated, 10)
	return append(buf, '}')
}

// appendJSONString quotes s.
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	buf = appendJSONStringContent(buf, s)
	return append(buf, '"')
}

// appendJSONStringContent appends s escaped for a JSON string, without the quotes. Real tokens
// and project ids are plain ASCII and take the fast path; anything else (tests send odd tokens
// on purpose) goes through encoding/json for correct escaping.
func appendJSONStringContent(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(buf, b[1:len(b)-1]...)
		}
	}
	return append(buf, s...)
}
