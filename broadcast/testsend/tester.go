package testsend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"pushfan/broadcast/instance"
	"pushfan/broadcast/message"
	"pushfan/broadcast/reads"
	"pushfan/broadcast/rules"
	"pushfan/engagement"
	"pushfan/fanout"
	"pushfan/internal/platform/lifecycle"
	"pushfan/repository"
)

// MaxTestTokens caps a test send's tokens, after user_ids are resolved:
// it is a rehearsal on a few devices, not a small broadcast.
const MaxTestTokens = 20

// testSendRetries is how many times a test send retries a token's
// transient failure (UNAVAILABLE, INTERNAL, quota, a timeout), with the
// engine's backoff, within the caller's deadline.
const testSendRetries = 2

// Options tunes the test sends.
type Options struct {
	DBTimeout time.Duration // deadline of every database call
	// Rules are the request rules a test message keeps, as a broadcast's
	// does, and the apps it may go through.
	Rules rules.Rules
	// Tags signs the test's event token (nil: tracking is off).
	Tags *engagement.Tagger
	// Stopped is closed when the broadcast service stops taking work: a
	// test send is refused from then on (ErrShuttingDown), as a submit is.
	Stopped *lifecycle.Latch
}

// Tester makes test sends through this instance's apps' engines.
type Tester struct {
	apps  *instance.Apps
	reads *reads.Reader // a stored broadcast's message
	log   *slog.Logger
	opt   Options
	now   func() time.Time
}

// New builds a Tester over this instance's apps.
func New(apps *instance.Apps, rd *reads.Reader, log *slog.Logger, opt Options) *Tester {
	return &Tester{apps: apps, reads: rd, log: log, opt: opt, now: time.Now}
}

// TestSend checks spec, resolves its users or tokens, sends the message to
// each token now (each with its own deadline, all within ctx's), and
// invalidates the dead tokens it finds. A *rules.FieldError is a request rule
// broken; by names the caller for the log.
func (ts *Tester) TestSend(ctx context.Context, spec TestSpec, by string) (*TestReport, error) {
	if ts.opt.Stopped.Closed() {
		return nil, instance.ErrShuttingDown
	}
	app, err := ts.opt.Rules.AppOf(ts.apps, spec.App)
	if err != nil {
		return nil, err
	}
	msg, userIDs, tokens, err := ts.validateTest(spec, app.Delivery)
	if err != nil {
		return nil, err
	}
	report := &TestReport{}
	if userIDs != nil {
		report.Results, report.UsersWithoutTokens, err = ts.resolveUsers(ctx, app.Store, userIDs)
	} else {
		report.Results, err = ts.resolveTokens(ctx, app.Store, tokens)
	}
	if err != nil {
		return nil, err
	}
	if len(report.Results) == 0 {
		return report, nil // every user was skipped: nothing to send
	}
	raw := make([]string, len(report.Results))
	for i, r := range report.Results {
		raw[i] = r.Token
	}
	if ts.opt.Tags != nil && !spec.untracked() {
		// A test send's token is genuine and marked a test: the app's
		// reporting can be tried with it, and it is never counted.
		data := maps.Clone(msg.Data)
		if data == nil {
			data = map[string]string{}
		}
		data[message.TagDataKey] = ts.opt.Tags.TestTag(0)
		msg.Data = data
	}
	outs, err := app.Engine.SendNow(ctx, msg, raw, testSendRetries)
	if errors.Is(err, fanout.ErrNotRunning) {
		return nil, instance.ErrShuttingDown
	} else if err != nil {
		return nil, fmt.Errorf("test send: %w", err)
	}
	var dead []int
	succeeded := 0
	for i, out := range outs {
		r := &report.Results[i]
		r.Attempts = max(out.Requests, 1)
		switch out.Class {
		case fanout.Success:
			r.Succeeded, r.MessageID = true, out.MessageID
			succeeded++
		case fanout.Dead:
			if r.State == TokenValid {
				dead = append(dead, i)
			}
			fallthrough
		default:
			r.Code, r.Message = out.Code, out.Detail
		}
	}
	ts.invalidateTested(ctx, app.Store, report.Results, dead)
	ts.log.InfoContext(ctx, "test send", "by", by, "tokens", len(outs), "succeeded", succeeded,
		"failed", len(outs)-succeeded, "invalidated", len(dead), "users_without_tokens", len(report.UsersWithoutTokens))
	return report, nil
}

// invalidateTested invalidates the dead tokens among results (indexes
// dead), one statement each so that each result says whether it was this
// send that invalidated it. The sends are done by now: a database error is
// logged, not returned, so the caller still gets what FCM answered.
func (ts *Tester) invalidateTested(ctx context.Context, store *repository.Store, results []TestResult, dead []int) {
	if len(dead) == 0 {
		return
	}
	// The caller's deadline may have been spent on the sends; the
	// invalidations get their own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ts.opt.DBTimeout)
	defer cancel()
	at := ts.now()
	for _, i := range dead {
		r := &results[i]
		n, err := store.InvalidateTokens(ctx, []repository.Invalidation{{TokenID: r.TokenID, Token: r.Token, Reason: r.Code}}, at)
		if err != nil {
			ts.log.ErrorContext(ctx, "test send: invalidating a dead token failed; the next broadcast to it will find it dead again", "token", fanout.TokenHint(r.Token), "code", r.Code, "err", err)
			continue
		}
		r.Invalidated = n > 0
	}
}

// TestRecipients names who a stored broadcast's message is test-sent to:
// exactly one of UserIDs or Tokens, and the variant's Locale.
type TestRecipients struct {
	UserIDs []uint64 `json:"user_ids"`
	Tokens  []string `json:"tokens"`
	Locale  string   `json:"locale"`
}

// TestSendBroadcast test-sends broadcast id's stored message (a held one,
// typically, before its release) to the recipients, as TestSend does. It
// changes nothing about the broadcast.
func (ts *Tester) TestSendBroadcast(ctx context.Context, id uint64, to TestRecipients, by string) (*TestReport, error) {
	b, err := ts.reads.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	m := b.Message
	if len(m.Variants) > 0 {
		// A broadcast with A/B variants is rehearsed with its first.
		track := m.Track
		m = m.Variants[0].Message
		m.Track = track
	}
	spec := TestSpec{
		Spec: rules.Spec{
			Title: m.Title, Body: m.Body, Image: m.Image, Data: m.Data, Localized: m.Localized, LinkDataKey: m.LinkKey,
			Android: m.Android, APNS: m.APNS, Webpush: m.Webpush, FCMOptions: m.FCMOptions,
		},
		UserIDs: to.UserIDs, Tokens: to.Tokens, Locale: to.Locale,
	}
	spec.App = b.App // a broadcast's rehearsal goes through its own project
	if b.Category != nil {
		spec.Category = b.Category.Name // its labels are on its message already: not added twice
	}
	spec.Track = m.Track
	return ts.TestSend(ctx, spec, by)
}
