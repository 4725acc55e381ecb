package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"pushfan/config"
)

// healthcheckTimeout bounds the whole probe: a container runtime runs it
// every interval and counts a hang as a failure only after its own,
// longer, timeout.
const healthcheckTimeout = 3 * time.Second

// healthcheck asks GET /readyz of this configuration's listen address
// (PUSHFAN_HTTP_ADDR, or http_addr in PUSHFAN_CONFIG) and returns nil on
// 200, or an error of one line saying why not. It is the image's
// HEALTHCHECK: the image is FROM scratch, with no curl or shell.
func healthcheck(ctx context.Context, args []string, getenv config.Getenv, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", healthcheckTimeout, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	// Parts 0: parse everything, validate nothing but the address below;
	// the probe must not fail on a setting only serve's start-up checks.
	cfg, err := config.LoadParts(getenv, 0)
	if err != nil {
		return fmt.Errorf("healthcheck: configuration: %s", oneLine(err.Error()))
	}
	target, err := localURL(cfg.HTTPAddr, "/readyz")
	if err != nil {
		return fmt.Errorf("healthcheck: PUSHFAN_HTTP_ADDR: %w", err)
	}
	return probeReady(ctx, target, *timeout)
}

// localURL is path on the listener at addr, as this host reaches it: a
// wildcard or empty host is reached on loopback.
func localURL(addr, path string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}

func probeReady(ctx context.Context, target string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	// No proxy: the probe is for this host's own listener, whatever
	// HTTP_PROXY the container was given.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("healthcheck: GET %s: no answer within %v", target, timeout)
		}
		return fmt.Errorf("healthcheck: GET %s: %s", target, oneLine(unwrapURLError(err).Error()))
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	return fmt.Errorf("healthcheck: GET %s: %s%s", target, resp.Status, apiReason(resp.Body))
}

// apiReason reads the API's error body ({"error":{"code","message"}}),
// e.g. readyz's database_unreachable, into ": code: message".
func apiReason(body io.Reader) string {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.NewDecoder(io.LimitReader(body, 64<<10)).Decode(&e) != nil || e.Error.Code == "" {
		return ""
	}
	return oneLine(": " + e.Error.Code + ": " + e.Error.Message)
}

// unwrapURLError drops net/http's "Get \"url\": " prefix: the message
// names the URL already.
func unwrapURLError(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
