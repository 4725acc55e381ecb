package fcmemu

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
)

// Main is the `pushfan emulator` command: it parses args (without the command name), serves
// the emulator until ctx is done, and shuts down gracefully. When the listener is ready it prints
// one line to stdout, "fcmemu listening on http://ADDR/v1 (project any)" (https in --tls mode),
// which scripts wait for. A bad flag returns an error naming the flag; -h returns flag.ErrHelp
// after printing usage to stdout.
func Main(ctx context.Context, args []string, stdout io.Writer, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, addr, opts, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	e := New(cfg, log) // cfg was validated by parseFlags
	lc := net.ListenConfig{}
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("--addr %s: %w", addr, err)
	}
	// NewServer writes the CA file; it runs before the readiness line so a script that waits
	// for the line finds the CA in place.
	srv, err := e.NewServer(ln.Addr().String(), opts)
	if err != nil {
		ln.Close()
		return err
	}
	scheme := "http"
	if opts.Mode == ModeTLS {
		scheme = "https"
	}
	if _, err := fmt.Fprintf(stdout, "fcmemu listening on %s://%s/v1 (project any)\n", scheme, ln.Addr()); err != nil {
		ln.Close()
		return fmt.Errorf("writing to stdout: %w", err)
	}
	log.Info("fcmemu started", "addr", ln.Addr().String(), "mode", string(opts.Mode),
		"latency", cfg.Latency, "jitter", cfg.Jitter, "error_rates", cfg.ErrorRates,
		"quota_limit", cfg.QuotaLimit, "storm_after", cfg.StormAfter, "storm_for", cfg.StormFor)
	err = runServer(ctx, srv, ln, opts.ShutdownTimeout)
	log.Info("fcmemu stopped", "err", err)
	return err
}

// parseFlags turns args into a validated Config, the listen address and server options.
func parseFlags(args []string, stdout io.Writer) (Config, string, ServerOptions, error) {
	var (
		cfg  Config
		opts ServerOptions
		addr string
		h2c  bool
		tls  bool
	)
	rates := map[string]float64{}
	fs := flag.NewFlagSet("pushfan emulator", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, usage printed only for -h
	fs.StringVar(&addr, "addr", "127.0.0.1:9099", "listen address (port 0 picks a free port)")
	fs.DurationVar(&cfg.Latency, "latency", 30*time.Millisecond, "wait before answering each send")
	fs.DurationVar(&cfg.Jitter, "jitter", 0, "uniform random extra wait in [0, jitter)")
	fs.Func("error-rate", "KIND=P: probability of a random error of KIND (UNAVAILABLE, INTERNAL, QUOTA_EXCEEDED, UNREGISTERED); repeatable",
		func(v string) error {
			kind, p, ok := strings.Cut(v, "=")
			if !ok {
				return errors.New("want KIND=P, e.g. UNAVAILABLE=0.01")
			}
			kind = strings.ToUpper(strings.TrimSpace(kind))
			if !isRandomKind(kind) {
				return fmt.Errorf("unknown kind %q (want one of %s)", kind, randomKindList)
			}
			f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil || !(f >= 0 && f <= 1) {
				return fmt.Errorf("probability %q must be a number in [0,1]", p)
			}
			rates[kind] = f
			return nil
		})
	fs.IntVar(&cfg.QuotaLimit, "quota", 0, "send requests allowed per quota window (0: no quota)")
	fs.DurationVar(&cfg.QuotaWindow, "quota-window", DefaultQuotaWindow, "length of the fixed quota window")
	fs.IntVar(&cfg.StormAfter, "storm-after", 0, "accepted sends before the 429 storm starts")
	fs.DurationVar(&cfg.StormFor, "storm-for", 0, "length of the 429 storm (0: no storm)")
	fs.DurationVar(&cfg.HangMax, "hang-max", DefaultHangMax, "longest a hang- token hangs")
	fs.DurationVar(&cfg.BackoffGrace, "backoff-grace", DefaultBackoffGrace, "arrivals this soon after a project 429 are not counted as ignoring Retry-After (negative: none)")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the random error and jitter draws")
	fs.BoolVar(&h2c, "h2c", false, "serve HTTP/2 without TLS (and HTTP/1.1)")
	fs.BoolVar(&tls, "tls", false, "serve HTTPS with HTTP/2 and a self-signed certificate")
	fs.StringVar(&opts.CAOut, "ca-out", "", "with --tls: write the CA certificate (PEM) to this file")
	fs.IntVar(&opts.MaxConcurrentStreams, "max-streams", 100, "HTTP/2 concurrent streams per connection")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintln(stdout, "usage: pushfan emulator [flags]")
			fs.PrintDefaults()
		}
		return cfg, "", opts, fmt.Errorf("emulator flags: %w", err)
	}
	if fs.NArg() > 0 {
		return cfg, "", opts, fmt.Errorf("emulator flags: unexpected argument %q", fs.Arg(0))
	}
	if len(rates) > 0 {
		cfg.ErrorRates = rates
	}
	switch {
	case h2c && tls:
		return cfg, "", opts, errors.New("emulator flags: --h2c and --tls exclude each other")
	case h2c:
		opts.Mode = ModeH2C
	case tls:
		opts.Mode = ModeTLS
	}
	if opts.CAOut != "" && !tls {
		return cfg, "", opts, errors.New("emulator flags: --ca-out needs --tls")
	}
	if err := checkFlagValues(&cfg); err != nil {
		return cfg, "", opts, fmt.Errorf("emulator flags: %w", err)
	}
	return cfg, addr, opts, nil
}

// checkFlagValues repeats Config.Validate's checks with the flags' names, so the message points
// at what the user typed.
func checkFlagValues(cfg *Config) error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--latency", cfg.Latency}, {"--jitter", cfg.Jitter}, {"--quota-window", cfg.QuotaWindow},
		{"--storm-for", cfg.StormFor}, {"--hang-max", cfg.HangMax}} {
		if d.v < 0 {
			return fmt.Errorf("%s: must not be negative, got %s", d.flag, d.v)
		}
	}
	if cfg.QuotaLimit < 0 {
		return fmt.Errorf("--quota: must not be negative, got %d", cfg.QuotaLimit)
	}
	if cfg.StormAfter < 0 {
		return fmt.Errorf("--storm-after: must not be negative, got %d", cfg.StormAfter)
	}
	sum := 0.0
	for _, p := range cfg.ErrorRates {
		sum += p
	}
	if sum > 1+1e-9 {
		return fmt.Errorf("--error-rate: rates sum to %v, more than 1", sum)
	}
	return cfg.Validate() // anything left, named by config field
}
