package fcmemu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// maxRequestBody bounds what a send request may make the emulator read; anything near it is far
// over the 4096-byte payload limit anyway.
const maxRequestBody = 1 << 20

func (e *Emulator) routes() http.Handler {
	mux := http.NewServeMux()
	// ServeMux takes "messages:send" as a literal segment, so no manual parsing is needed.
	mux.HandleFunc("POST /v1/projects/{project}/messages:send", e.serveSend)
	mux.HandleFunc("POST /projects/{project}/messages:send", e.serveSend)
	mux.HandleFunc("GET /emulator/counts", e.serveCounts)
	mux.HandleFunc("GET /emulator/stats", e.serveStats)
	mux.HandleFunc("POST /emulator/reset", e.serveReset)
	mux.HandleFunc("GET /emulator/config", e.serveGetConfig)
	mux.HandleFunc("PUT /emulator/config", e.servePutConfig)
	mux.HandleFunc("POST /emulator/devices/{token}/{state}", e.serveDevice)
	// The catch-all also takes wrong methods on the routes above (ServeMux prefers a matching
	// pattern to its own 405), so every miss answers in the google.rpc.Status shape.
	mux.HandleFunc("/", serveNotFound)
	return mux
}

func serveNotFound(w http.ResponseWriter, r *http.Request) {
	writeStatus(w, http.StatusNotFound, "NOT_FOUND",
		"The requested URL "+r.URL.Path+" was not found on this server (method "+r.Method+").")
}

// answer is the decision for one send request.
type answer struct {
	code       code
	body       []byte // overrides the code's static body
	retryAfter int    // seconds; > 0 adds Retry-After
	refill     int64  // project 429s: the instant the shortage ends
	hang       bool
}

// serveSend is the FCM send call. Order: count the arrival (and whether it ignored a Retry-After),
// read and validate the body, wait the latency, then decide (storm, quota, validation, token
// prefix, random errors) and answer. Counters are updated before the answer is written, so a
// client that has its answer can read exact counts.
func (e *Emulator) serveSend(w http.ResponseWriter, r *http.Request) {
	arrived := e.now()
	s := &e.stats
	s.requests.Add(1)
	s.enter()
	defer s.leave()
	cfg := e.cfg.Load()
	duringProject := e.backoff.during(arrived)

	p, ok := e.readSend(w, r)
	if !ok { // the client went away while sending the body
		s.byCode[codeCanceled].Add(1)
		return
	}

	var te *tokenEntry
	var attempt int64
	if p.hasToken {
		te = e.tokens.entry(p.token)
		attempt = te.attempts.Add(1)
	} else {
		attempt = int64(e.reqSeq.Add(1)) // token-less sends draw their randomness per request
	}
	duringToken := te != nil && arrived < te.backoffUntil.Load()
	if duringProject || duringToken {
		s.duringBackoff.Add(1)
		if duringProject {
			s.duringProject.Add(1)
		}
		if duringToken {
			s.duringToken.Add(1)
		}
	}

	ctx := r.Context()
	if !sleepCtx(ctx, e.latency(cfg, p.token, attempt)) {
		s.byCode[codeCanceled].Add(1)
		return
	}
	project := r.PathValue("project")
	a := e.decide(cfg, project, &p, attempt)
	if a.hang {
		if !hang(ctx, cfg.HangMax) {
			s.byCode[codeCanceled].Add(1)
			return
		}
		a = answer{code: codeUnavailable}
	}
	e.respond(w, cfg, project, &p, te, a)
}

// readSend reads the body through a pooled buffer and parses it. ok is false when the body could
// not be read (the client is gone).
func (e *Emulator) readSend(w http.ResponseWriter, r *http.Request) (parsedSend, bool) {
	buf := e.bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 64<<10 { // do not keep the odd huge buffer alive in the pool
			e.bufPool.Put(buf)
		}
	}()
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxRequestBody)); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return parsedSend{reject: reject("message", "Message is too big: the request body exceeds %d bytes.", maxRequestBody)}, true
		}
		return parsedSend{}, false
	}
	// parseSend copies what it keeps (strings), so buf can go back to the pool.
	p := parseSend(buf.Bytes())
	if p.hasToken {
		e.rec.record(p.token, buf.Bytes())
		if e.devs.watched(p.token) {
			p.msg = message(buf.Bytes())
		}
	}
	return p, true
}

// latency is this request's wait: Latency plus a deterministic share of Jitter.
func (e *Emulator) latency(cfg *settings, token string, attempt int64) time.Duration {
	d := cfg.Latency
	if cfg.Jitter > 0 {
		d += time.Duration(draw(cfg.Seed, token, attempt, saltJitter) * float64(cfg.Jitter))
	}
	return d
}

// sleepCtx waits d, returning false if ctx ends first. A timer rather than time.Sleep so a
// client that gives up frees the handler at once.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// drainKey marks, in a server's base context, a channel closed when the server shuts down, so
// hanging requests let Shutdown finish.
type drainKey struct{}

// hang blocks a hang- token's request. It returns false when the client gave up (no answer is
// due) and true when the server drains or max passed (the caller answers 503).
func hang(ctx context.Context, max time.Duration) bool {
	drain, _ := ctx.Value(drainKey{}).(chan struct{}) // nil outside NewServer: blocks forever
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-drain:
		return true
	case <-t.C:
		return true
	}
}

// decide picks the answer at the end of the latency, so Retry-After values are computed for the
// instant the answer leaves.
func (e *Emulator) decide(cfg *settings, project string, p *parsedSend, attempt int64) answer {
	now := e.now()
	if end, in, started := e.storm.Load().check(now, e.stats.accepted.Load()); in || started {
		if started {
			e.log.Info("fcmemu storm started", "for", cfg.StormFor)
		}
		if in {
			return e.projectQuotaAnswer(project, cfg.QuotaLimit, now, end)
		}
	}
	if cfg.QuotaLimit > 0 {
		if refill, ok := e.quota.take(now, cfg.QuotaLimit, cfg.QuotaWindow); !ok {
			return e.projectQuotaAnswer(project, cfg.QuotaLimit, now, refill)
		}
	}
	if p.reject != nil {
		return answer{code: codeInvalidArgument, body: invalidArgumentBody(p.reject.field, p.reject.msg)}
	}
	if o := outcomeForToken(p.token, attempt); o.hang || o.code != codeOK {
		return answer{code: o.code, hang: o.hang, retryAfter: targetRetryAfter(o.code)}
	}
	if c := randomError(cfg, p.token, p.hasToken, attempt); c != codeOK {
		return answer{code: c, retryAfter: targetRetryAfter(c)}
	}
	return answer{code: codeOK}
}

// projectQuotaAnswer is the project-shape 429 for a shortage ending at refill, with Retry-After
// rounded up from now so a client honouring it never comes back early.
func (e *Emulator) projectQuotaAnswer(project string, limit int, now, refill int64) answer {
	return answer{
		code:       codeRateLimitExceeded,
		retryAfter: ceilSeconds(refill - now),
		refill:     refill,
		body:       e.projectQuotaBody(project, limit),
	}
}

// targetRetryAfter is the Retry-After of per-target answers: FCM sends one with QUOTA_EXCEEDED.
func targetRetryAfter(c code) int {
	if c == codeQuotaExceeded {
		return 1
	}
	return 0
}

// randomError draws the random error of an otherwise-good send. UNREGISTERED is drawn per token
// (a dead token stays dead); the other kinds per attempt, scaled so each kind's overall rate is
// the configured one.
func randomError(cfg *settings, token string, hasToken bool, attempt int64) code {
	if cfg.pUnregistered == 0 && cfg.pUnavailable == 0 && cfg.pInternal == 0 && cfg.pQuota == 0 {
		return codeOK
	}
	pU := cfg.pUnregistered
	if hasToken && pU > 0 && draw(cfg.Seed, token, 0, saltUnreg) < pU {
		return codeUnregistered
	}
	rest := 1 - pU
	if rest <= 0 {
		return codeOK
	}
	u := draw(cfg.Seed, token, attempt, saltError) * rest
	for _, k := range [...]struct {
		p float64
		c code
	}{{cfg.pUnavailable, codeUnavailable}, {cfg.pInternal, codeInternal}, {cfg.pQuota, codeQuotaExceeded}} {
		if u < k.p {
			return k.c
		}
		u -= k.p
	}
	return codeOK
}

// respond counts the answer, records the back-off it announces, and writes it.
func (e *Emulator) respond(w http.ResponseWriter, cfg *settings, project string, p *parsedSend, te *tokenEntry, a answer) {
	s := &e.stats
	s.byCode[a.code].Add(1)
	if a.code == codeOK {
		if p.validateOnly {
			s.validated.Add(1)
			if te != nil {
				te.validated.Add(1)
			}
		} else {
			s.accepted.Add(1)
			if te != nil {
				te.accepted.Add(1)
			}
			if p.msg != nil {
				e.accept(p.token, p.msg)
			}
		}
		writeBody(w, http.StatusOK, e.successBody(project), 0)
		return
	}
	if a.code == codeRateLimitExceeded {
		e.backoff.announce(e.now(), a.refill, int64(cfg.grace()))
	} else if a.retryAfter > 0 && te != nil {
		// Computed before the answer is written, so a client that waits Retry-After after
		// receiving it always arrives at or after this instant.
		storeMax(&te.backoffUntil, e.now()+int64(a.retryAfter)*int64(time.Second))
	}
	body := a.body
	if body == nil {
		body = e.bodies[a.code]
	}
	writeBody(w, a.code.spec().http, body, a.retryAfter)
}

func storeMax(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// successBody is {"name":"projects/P/messages/0:SEQ%INSTANCE"}, FCM's id format, built without
// reflection.
func (e *Emulator) successBody(project string) []byte {
	b := make([]byte, 0, 64+len(project)+len(e.instance))
	b = append(b, `{"name":"projects/`...)
	b = appendJSONStringContent(b, project)
	b = append(b, "/messages/0:"...)
	b = strconv.AppendUint(b, e.msgSeq.Add(1), 10)
	b = append(b, '%')
	b = append(b, e.instance...)
	return append(b, "\"}"...)
}

// quotaBody caches the project-quota body: a storm sends thousands of identical ones.
type quotaBody struct {
	project string
	limit   int
	body    []byte
}

func (e *Emulator) projectQuotaBody(project string, limit int) []byte {
	if c := e.quotaBodyCache.Load(); c != nil && c.project == project && c.limit == limit {
		return c.body
	}
	c := &quotaBody{project, limit, projectQuotaBody(project, limit)}
	e.quotaBodyCache.Store(c)
	return c.body
}

// serveCounts streams per-token counts; ?token=T answers for one token (zeros if unseen).
func (e *Emulator) serveCounts(w http.ResponseWriter, r *http.Request) {
	w.Header()["Content-Type"] = []string{contentTypeJSON}
	if q := r.URL.Query(); q.Has("token") {
		t := q.Get("token")
		b := append([]byte(`{"tokens":{`), appendTokenRow(nil, t, e.tokens.lookup(t))...)
		b = append(b, "},\"token_count\":1}\n"...)
		_, _ = w.Write(b)
		return
	}
	if err := e.tokens.writeJSON(w); err != nil {
		e.log.Debug("fcmemu: writing counts", "err", err)
	}
}

func (e *Emulator) serveStats(w http.ResponseWriter, r *http.Request) {
	writeJSONValue(w, http.StatusOK, e.Stats())
}

func (e *Emulator) serveReset(w http.ResponseWriter, r *http.Request) {
	e.Reset()
	writeJSONValue(w, http.StatusOK, e.Stats())
}

func (e *Emulator) serveGetConfig(w http.ResponseWriter, r *http.Request) {
	writeJSONValue(w, http.StatusOK, e.Config())
}

// servePutConfig merges the fields present in the body into the current config.
func (e *Emulator) servePutConfig(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		writeStatus(w, http.StatusBadRequest, "INVALID_ARGUMENT", "reading config: "+err.Error())
		return
	}
	e.cfgMu.Lock()
	cfg := e.cfg.Load().Config
	err = json.Unmarshal(body, &cfg)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		e.cfgMu.Unlock()
		writeStatus(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	e.storeConfigLocked(cfg)
	e.cfgMu.Unlock()
	writeJSONValue(w, http.StatusOK, e.Config())
}

func writeJSONValue(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, "INTERNAL", err.Error())
		return
	}
	writeBody(w, status, append(b, '\n'), 0)
}
