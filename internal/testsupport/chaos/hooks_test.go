package chaos

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// hookSink is the apps' webhook receiver: it counts the webhook-ids it
// got. While away it drops every connection without an answer, as a
// receiver mid-deploy or behind a dead load balancer would.
type hookSink struct {
	away atomic.Bool
	mu   sync.Mutex
	ids  map[string]int
}

func newHookSink() *hookSink { return &hookSink{ids: map[string]int{}} }

func (h *hookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if h.away.Load() {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	h.mu.Lock()
	h.ids[r.Header.Get("webhook-id")]++
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// received reports whether id was delivered, and how many ids were twice.
func (h *hookSink) received() (map[string]int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.ids))
	twice := 0
	for id, n := range h.ids {
		out[id] = n
		if n > 1 {
			twice++
		}
	}
	return out, twice
}
