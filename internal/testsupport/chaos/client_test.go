package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// call is one API request to base. A status, not an error, for any answer.
func call(ctx context.Context, hc *http.Client, base, method, path, key string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("encoding %s %s: %w", method, path, err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, r)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s%s: %w", method, base, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("reading %s %s: %w", method, path, err)
	}
	return resp.StatusCode, raw, nil
}

// callAny sends the request to a live replica, and again to another one
// (same Idempotency-Key: a retry of a submit whose answer was lost is the
// same broadcast) until one answers below 500 or `within` passes. A
// client behind a load balancer does the same.
func (s *stack) callAny(ctx context.Context, hc *http.Client, method, path, key string, body any, within time.Duration) (int, []byte, error) {
	deadline := time.Now().Add(within)
	var lastErr error
	for i := 0; ; i++ {
		live := s.live()
		if len(live) > 0 {
			status, raw, err := call(ctx, hc, live[i%len(live)], method, path, key, body)
			if err == nil && status < 500 {
				return status, raw, nil
			}
			lastErr = err
			if err == nil {
				lastErr = fmt.Errorf("%s %s: %d %s", method, path, status, raw)
			}
		}
		if time.Now().After(deadline) {
			return 0, nil, fmt.Errorf("timed out after %v retrying %s %s on the live replicas: %w", within, method, path, lastErr)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return 0, nil, err
		}
	}
}

// broadcastAnswer is the part of the API's broadcast object the load reads.
type broadcastAnswer struct {
	ID        uint64 `json:"id"`
	Status    string `json:"status"`
	Targeted  int64  `json:"targeted"`
	Succeeded int64  `json:"succeeded"`
}
