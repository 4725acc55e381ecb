package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"pushfan/internal/devtools/apiclient"
)

type client struct {
	api, emu, token string
	http            *http.Client
}

func (c *client) do(ctx context.Context, method, url string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if strings.HasPrefix(url, c.api) {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func (c *client) resetEmulator(ctx context.Context) error {
	code, body, err := c.do(ctx, http.MethodPost, c.emu+"/emulator/reset", nil)
	if err != nil || code != http.StatusOK {
		return fmt.Errorf("resetting the emulator: %d %s %v", code, body, err)
	}
	return nil
}

func (c *client) emulatorStats(ctx context.Context) (EmuStats, error) {
	var s EmuStats
	code, body, err := c.do(ctx, http.MethodGet, c.emu+"/emulator/stats", nil)
	if err != nil || code != http.StatusOK {
		return s, fmt.Errorf("emulator stats: %d %v", code, err)
	}
	return s, json.Unmarshal(body, &s)
}

// broadcastView is the API's broadcast object as this client reads it.
type broadcastView = apiclient.Broadcast

func final(status string) bool {
	return status == "completed" || status == "canceled" || status == "failed"
}

// broadcastAndWait submits a broadcast to the whole audience, runs during
// (if any) until it returns, and polls the broadcast every 250 ms until it is
// final. during gets a channel closed when the broadcast is final.
func (c *client) broadcastAndWait(ctx context.Context, title string, timeout time.Duration, during func(id uint64, finished <-chan struct{})) (BroadcastRun, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"title": title, "body": "pushfan load test", "audience": map[string]bool{"all": true}})
	before := c.resources(ctx)
	submitted := time.Now()
	code, raw, err := c.do(ctx, http.MethodPost, c.api+"/push/broadcast?wait=0", body)
	if err != nil || (code != http.StatusAccepted && code != http.StatusOK) {
		return BroadcastRun{}, fmt.Errorf("submitting: %d %s %v", code, raw, err)
	}
	var v broadcastView
	if err := json.Unmarshal(raw, &v); err != nil {
		return BroadcastRun{}, fmt.Errorf("decoding the submit answer: %w", err)
	}
	finished := make(chan struct{})
	var wg sync.WaitGroup
	if during != nil {
		wg.Go(func() { during(v.ID, finished) })
	}
	var pollErr error
	for !final(v.Status) {
		select {
		case <-ctx.Done():
			pollErr = fmt.Errorf("broadcast %d still %s after %v: %w", v.ID, v.Status, timeout, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
		if pollErr != nil {
			break
		}
		code, raw, err := c.do(ctx, http.MethodGet, fmt.Sprintf("%s/push/broadcasts/%d", c.api, v.ID), nil)
		if err != nil || code != http.StatusOK {
			continue // transient under load; the deadline bounds the loop
		}
		_ = json.Unmarshal(raw, &v)
	}
	close(finished)
	wg.Wait()
	if pollErr != nil {
		return BroadcastRun{}, pollErr
	}
	r := BroadcastRun{
		ID: v.ID, Status: v.Status, Targeted: v.Targeted, Succeeded: v.Succeeded, Failed: v.Failed,
		Canceled: v.Canceled, Errors: v.Errors, StartedAt: v.StartedAt, FinishedAt: v.FinishedAt,
		SubmitToFinal: time.Since(submitted).Seconds(),
	}
	if after := c.resources(ctx); before != nil && after != nil {
		r.Resources = map[string]float64{}
		for k, v := range after {
			r.Resources[k] = v - before[k]
		}
	}
	if v.StartedAt != nil && v.FinishedAt != nil {
		r.SendSeconds = v.FinishedAt.Sub(*v.StartedAt).Seconds()
		if r.SendSeconds > 0 {
			r.TokensPerSec = float64(v.Targeted) / r.SendSeconds
		}
	}
	return r, nil
}
