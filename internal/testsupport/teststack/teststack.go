// Package teststack starts a whole pushfan in-process for tests: a fresh
// MariaDB database, the FCM emulator on loopback HTTP, and one or more
// instances wired by package app (the real firebase SDK or direct client,
// the engine, the broadcast service, the scheduler, the HTTP API). It also
// has a TCP proxy that can cut the database connection or fault COMMITs,
// and waits with deadlines (WaitEvery, Receive).
package teststack

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"pushfan/internal/devtools/apiclient"
	"pushfan/internal/devtools/demo"
	"pushfan/internal/platform/sqldb"

	"github.com/jmoiron/sqlx"

	"pushfan/broadcast"
	"pushfan/cmd/pushfan/app"
	"pushfan/config"
	"pushfan/fcmemu"
	"pushfan/internal/platform/logging"
	"pushfan/internal/testsupport/testdb"
	"pushfan/lease"
	"pushfan/repository"
	"pushfan/server"
)

// AdminToken is the bearer token every stack accepts.
const AdminToken = "test-admin-token-0123456789"

// Stack is a database, an emulator, and one or more pushfan instances
// sharing them (the first one's parts are also the Stack's own fields).
type Stack struct {
	T      testing.TB
	Store  *repository.Store
	SQL    *sqlx.DB     // the pool under Store, for fixtures
	Leases *lease.Store // the chunk rows, for tests that look at them mid-run
	DSN    string
	Emu    *fcmemu.Emulator
	EmuURL string
	// EmuServer serves the emulator (CloseClientConnections cuts every
	// connection to it).
	EmuServer *httptest.Server
	API       *httptest.Server
	Config    config.Config
	Service   *broadcast.Service
	Proxy     *Proxy // between the instances and MariaDB, with Options.DBProxy
	// HTTP is the client Do uses, and the one a test making its own
	// requests must use: it validates every request and response against
	// the OpenAPI document (contract.go) and fails the test on a mismatch.
	HTTP  *http.Client
	First *Instance
	logs  *lockedWriter
	// serverOptions are Options.ServerOptions.
	serverOptions []server.Option
	log           *slog.Logger
}

// LogText returns the JSON log lines captured so far (CaptureLogs).
func (s *Stack) LogText() string {
	s.logs.mu.Lock()
	defer s.logs.mu.Unlock()
	return s.logs.buf.String()
}

// Options adjust a stack before it starts.
type Options struct {
	Emulator fcmemu.Config
	// EmulatorTLS serves the emulator over TLS + HTTP/2, as FCM, with its
	// certificate in PUSHFAN_FCM_CA_FILE (plaintext HTTP/1.1 otherwise).
	EmulatorTLS bool
	// Configure may change the configuration (engine knobs, timeouts).
	Configure func(*config.Config)
	// CaptureLogs collects the JSON logs (LogText) instead of discarding them.
	CaptureLogs bool
	// DBProxy routes the instances' MySQL connections through a proxy the
	// test can cut (a database outage).
	DBProxy bool
	// Prepare runs on the fresh database before any instance starts (e.g.
	// to create the tables a named audience reads).
	Prepare func(s *Stack)
	// EmulatorWrap, if set, wraps the emulator's handler: a test that
	// must hold one send in flight at a moment it chooses puts a gate in
	// front of it.
	EmulatorWrap func(http.Handler) http.Handler
	// NoContract turns off validating the exchanges against the OpenAPI
	// document, which is on by default. Only for a test of something the
	// document cannot describe.
	NoContract bool
	// ServerOptions are added to every instance's API options (a
	// recording server.Auditor).
	ServerOptions []server.Option
}

// Instance is one pushfan process's worth of parts.
type Instance struct {
	Service *broadcast.Service
	API     *httptest.Server
	App     *app.Instance
}

// New starts a stack and stops it when the test ends.
func New(t testing.TB, o Options) *Stack {
	t.Helper()
	tdb := testdb.New(t)
	store, dsn := tdb.Store, tdb.DSN
	emu := fcmemu.New(o.Emulator, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var emuHandler http.Handler = emu.Handler()
	if o.EmulatorWrap != nil {
		emuHandler = o.EmulatorWrap(emuHandler)
	}
	emuSrv := httptest.NewUnstartedServer(emuHandler)
	var caFile string
	if o.EmulatorTLS {
		emuSrv.EnableHTTP2 = true
		emuSrv.StartTLS()
		caFile = filepath.Join(t.TempDir(), "emulator-ca.pem")
		if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: emuSrv.Certificate().Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
	} else {
		emuSrv.Start()
	}
	t.Cleanup(emuSrv.Close)

	cfg := config.Defaults()
	cfg.MySQLDSN = dsn
	cfg.FCMEndpoint = emuSrv.URL + "/v1"
	cfg.FCMProjectID = "test-project"
	cfg.FCMCAFile = caFile
	cfg.AdminTokens = []string{AdminToken}
	cfg.Engine.Concurrency = 128
	cfg.Engine.PageSize = 200
	cfg.Engine.SendTimeout = 5 * time.Second
	cfg.Engine.RetryBaseDelay = 20 * time.Millisecond
	cfg.Engine.FlushInterval = 100 * time.Millisecond
	cfg.Engine.RateLimit = 100000
	cfg.Engine.RampUp = 500 * time.Millisecond
	cfg.Engine.PollInterval = 50 * time.Millisecond
	cfg.Engine.ChunkWidth = 1000 // several chunks even for small test audiences
	cfg.HTTP.SubmitPerMinute = 100000
	cfg.HTTP.TestSendsPerMinute = 100000
	cfg.HTTP.PreviewsPerMinute = 100000
	cfg.HTTP.PreviewCache = 0   // tests preview right after they seed
	cfg.HTTP.StatsCache = 0     // tests read totals right after a broadcast
	cfg.HTTP.BroadcastCache = 0 // and broadcasts right after they change
	// A submit that waits for its end waits longer than the default 25 s
	// (under the 60 s write timeout): server's stack tests run four at a
	// time beside other packages, and a small broadcast answered 202 there
	// is the machine's load, not a defect. Tests of the 202 answer set their
	// own wait.
	cfg.HTTP.WaitTimeout = 50 * time.Second
	cfg.Engine.StartSpread = 0 // tests that time a start set the spread they mean
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	s := &Stack{T: t, Store: store, SQL: tdb.SQL, Leases: lease.New(tdb.SQL.DB, nil), DSN: dsn, Emu: emu, EmuURL: emuSrv.URL, EmuServer: emuSrv, logs: &lockedWriter{buf: &bytes.Buffer{}},
		HTTP: newContractClient(t, o.NoContract), serverOptions: o.ServerOptions}
	if o.DBProxy {
		s.Proxy = NewProxy(t, "127.0.0.1:3306")
		cfg.MySQLDSN = s.Proxy.DSN(dsn)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config invalid: %v", err)
	}
	s.Config = cfg
	var w io.Writer = io.Discard
	if o.CaptureLogs {
		w = s.logs
	} else if os.Getenv("PUSHFAN_TEST_LOGS") != "" {
		w = os.Stderr
	}
	log, err := logging.New(w, "json", "debug")
	if err != nil {
		t.Fatal(err)
	}
	s.log = log
	if o.Prepare != nil {
		o.Prepare(s)
	}
	first := s.AddInstance()
	s.API, s.Service, s.First = first.API, first.Service, first
	return s
}

// AddInstance starts another pushfan instance on the same database and
// emulator, as a second replica would run.
func (s *Stack) AddInstance() *Instance {
	s.T.Helper()
	return s.AddInstanceWith(nil)
}

// AddInstanceWith is AddInstance with configure changing this instance's
// copy of the configuration (another version in a rolling deploy).
func (s *Stack) AddInstanceWith(configure func(*config.Config)) *Instance {
	t := s.T
	t.Helper()
	ctx := context.Background()
	cfg := s.Config
	if configure != nil {
		configure(&cfg)
	}
	pool, err := sqldb.Open(ctx, cfg.MySQLDSN, cfg.DB.MaxOpen, s.log)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := app.New(ctx, cfg, pool, s.log, s.serverOptions...)
	if err != nil {
		t.Fatal(err)
	}
	svc, api := inst.Service, inst.API
	inst.Start(context.Background())
	apiSrv := httptest.NewUnstartedServer(api.Handler())
	apiSrv.Config = api.HTTPServer()
	apiSrv.Config.Addr = ""
	apiSrv.Start()
	t.Cleanup(func() {
		apiSrv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := inst.Stop(ctx); err != nil {
			t.Errorf("stopping an instance: %v", err)
		}
		pool.Close()
	})
	return &Instance{Service: svc, API: apiSrv, App: inst}
}

// Do sends a request with the admin token and decodes a JSON answer into out
// (if non-nil). It returns the response (body consumed).
func (s *Stack) Do(method, path string, body any, out any) *http.Response {
	s.T.Helper()
	return s.DoAuth(method, path, AdminToken, body, out)
}

// DoURL is Do against another instance's base URL.
func (s *Stack) DoURL(base, method, path string, body any, out any) *http.Response {
	s.T.Helper()
	return s.do(base, method, path, AdminToken, body, out)
}

// DoAuth is Do with an explicit token ("" sends none). A string or []byte
// body is sent as is; anything else is JSON-encoded.
func (s *Stack) DoAuth(method, path, token string, body any, out any) *http.Response {
	s.T.Helper()
	return s.do(s.API.URL, method, path, token, body, out)
}

func (s *Stack) do(base, method, path, token string, body any, out any) *http.Response {
	s.T.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = bytes.NewBufferString(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			s.T.Fatal(err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, base+path, r)
	if err != nil {
		s.T.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.HTTP.Do(req)
	if err != nil {
		s.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		s.T.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			s.T.Fatalf("%s %s: decoding %q: %v", method, path, raw, err)
		}
	}
	return resp
}

// Broadcast is the API's broadcast object as this client reads it.
type Broadcast = apiclient.Broadcast

// ErrorBody is the API's error JSON.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}

// WaitFinished polls GET /push/broadcasts/{id} until the broadcast is final.
func (s *Stack) WaitFinished(id uint64, within time.Duration) Broadcast {
	s.T.Helper()
	deadline := time.Now().Add(within)
	for {
		var b Broadcast
		s.Do("GET", "/push/broadcasts/"+itoa(id), nil, &b)
		switch b.Status {
		case "completed", "canceled", "failed":
			return b
		}
		if time.Now().After(deadline) {
			s.T.Fatalf("broadcast %d still %s after %v", id, b.Status, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitPlanned polls GET /push/broadcasts/{id} until its audience is
// planned (planned_at set: targeted is the whole audience) or it ended,
// failing the test after within.
func (s *Stack) WaitPlanned(id uint64, within time.Duration) Broadcast {
	s.T.Helper()
	var b Broadcast
	WaitEvery(s.T, fmt.Sprintf("broadcast %d planned", id), within, 20*time.Millisecond, func() bool {
		b = Broadcast{}
		s.Do("GET", "/push/broadcasts/"+itoa(id), nil, &b)
		return b.Planned() || b.Final()
	})
	return b
}

func itoa(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// Seeder seeds demo data into the stack's database.
func (s *Stack) Seeder() *demo.Seeder { return demo.New(s.SQL, s.log) }

// MustExec runs SQL against the stack's database.
func (s *Stack) MustExec(query string, args ...any) {
	s.T.Helper()
	if _, err := s.SQL.Exec(query, args...); err != nil {
		s.T.Fatalf("%s: %v", query, err)
	}
}
