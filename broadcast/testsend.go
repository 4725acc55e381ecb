package broadcast

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"time"

	"pushfan/broadcast/message"
	"pushfan/broadcast/rules"
	"pushfan/fanout"
	"pushfan/model"
	"pushfan/repository"
)

// A test send (POST /push/test) is an operator checking a message on a few
// devices before a campaign: it sends now, while the caller waits, and
// answers per token. It is not a broadcast: no row, no chunks, nothing in
// the stats. It is a real send all the same: it spends the FCM budget like
// any (see fanout.Engine.SendNow) and the dead tokens it finds are
// invalidated, as a broadcast's are.

// MaxTestTokens caps a test send's tokens, after user_ids are resolved:
// it is a rehearsal on a few devices, not a small broadcast.
const MaxTestTokens = 20

// testSendRetries is how many times a test send retries a token's
// transient failure (UNAVAILABLE, INTERNAL, quota, a timeout), with the
// engine's backoff, within the caller's deadline.
const testSendRetries = 2

// TestSpec is a test send's request: the message fields of a broadcast
// (Spec, checked by the same rules) and exactly one of UserIDs or Tokens.
// Spec's fields that say who gets a broadcast or when (audience, dry_run,
// send_at, class, pacing) do not apply and are refused.
type TestSpec struct {
	rules.Spec
	UserIDs []uint64 `json:"user_ids"`
	Tokens  []string `json:"tokens"`
	// Locale picks which of a localized message's variants every token
	// gets, as a user of that locale would (the top-level title and body
	// when it is empty or matches none): a rehearsal of one language.
	Locale string `json:"locale"`
}

// untracked: the test message says "track": false.
func (t TestSpec) untracked() bool { return t.Track != nil && !*t.Track }

// Token states in a TestResult.
const (
	TokenValid       = "valid"       // a device_tokens row, not invalidated
	TokenInvalidated = "invalidated" // a device_tokens row already invalidated
	TokenStale       = "stale"       // a device_tokens row not refreshed within PUSHFAN_STALE_AFTER
	TokenUnknown     = "unknown"     // no device_tokens row (a raw token)
)

// Reasons a user of a test send got nothing.
const (
	SkipUnknownUser   = "unknown_user"
	SkipPushDisabled  = "push_disabled"
	SkipNoValidTokens = "no_valid_tokens"
)

// TestResult is one token's outcome. Token is whole: the HTTP view
// shortens it.
type TestResult struct {
	Token   string
	TokenID uint64 // 0 when unknown
	UserID  uint64 // 0 when unknown
	State   string // TokenValid, TokenInvalidated, TokenStale, TokenUnknown
	// Succeeded, or Code and Message say why not.
	Succeeded bool
	Code      string
	Message   string
	MessageID string // FCM's name for the message, on success
	Attempts  int    // HTTP requests made
	// Invalidated: this send found the token dead and invalidated it.
	Invalidated bool
}

// SkippedUser is a user of a test send that no token was sent to.
type SkippedUser struct {
	UserID uint64
	Reason string // SkipUnknownUser, SkipPushDisabled, SkipNoValidTokens
}

// TestReport is a test send's answer.
type TestReport struct {
	Results            []TestResult
	UsersWithoutTokens []SkippedUser
}

// TestSend checks spec, resolves its users or tokens, sends the message to
// each token now (each with its own deadline, all within ctx's), and
// invalidates the dead tokens it finds. A *rules.FieldError is a request rule
// broken; by names the caller for the log.
func (s *Service) TestSend(ctx context.Context, spec TestSpec, by string) (*TestReport, error) {
	if s.stopping.Closed() {
		return nil, ErrShuttingDown
	}
	app, err := s.opt.Rules.AppOf(s.apps, spec.App)
	if err != nil {
		return nil, err
	}
	msg, userIDs, tokens, err := s.validateTest(spec, app.Delivery)
	if err != nil {
		return nil, err
	}
	report := &TestReport{}
	if userIDs != nil {
		report.Results, report.UsersWithoutTokens, err = s.resolveUsers(ctx, app.Store, userIDs)
	} else {
		report.Results, err = s.resolveTokens(ctx, app.Store, tokens)
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
	if s.opt.Tags != nil && !spec.untracked() {
		// A test send's token is genuine and marked a test: the app's
		// reporting can be tried with it, and it is never counted.
		data := maps.Clone(msg.Data)
		if data == nil {
			data = map[string]string{}
		}
		data[message.TagDataKey] = s.opt.Tags.TestTag(0)
		msg.Data = data
	}
	outs, err := app.Engine.SendNow(ctx, msg, raw, testSendRetries)
	if errors.Is(err, fanout.ErrNotRunning) {
		return nil, ErrShuttingDown
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
	s.invalidateTested(ctx, app.Store, report.Results, dead)
	s.log.InfoContext(ctx, "test send", "by", by, "tokens", len(outs), "succeeded", succeeded,
		"failed", len(outs)-succeeded, "invalidated", len(dead), "users_without_tokens", len(report.UsersWithoutTokens))
	return report, nil
}

// validateTest checks a test send's request: the message by the broadcast
// rules (as a message to the built-in audience: no template variables,
// for there is no audience row to fill them from), and who it is for.
func (s *Service) validateTest(spec TestSpec, delivery model.DeliveryDefaults) (msg *fanout.Message, userIDs []uint64, tokens []string, err error) {
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"audience", spec.Audience != nil},
		{"dry_run", spec.DryRun},
		{"invalidate_on_dry_run", spec.InvalidateOnDryRun},
		{"send_at", spec.SendAt != ""},
		{"class", spec.Class != ""},
		{"max_rate", spec.MaxRate != nil},
		{"deliver_over", spec.DeliverOver != ""},
		{"hold", spec.Hold},
	} {
		if f.set {
			return nil, nil, nil, message.FieldErrorf("not_applicable", f.name, "%s does not apply to a test send, which goes now to the user_ids or tokens it names", f.name)
		}
	}
	switch {
	case spec.UserIDs != nil && spec.Tokens != nil:
		return nil, nil, nil, message.FieldErrorf("invalid_value", "tokens", "set exactly one of user_ids or tokens, not both")
	case spec.UserIDs == nil && spec.Tokens == nil:
		return nil, nil, nil, message.FieldErrorf("missing_field", "user_ids", "a test send needs user_ids (their valid tokens) or tokens (raw device tokens), at most %d tokens", MaxTestTokens)
	case spec.UserIDs != nil:
		if userIDs, err = testUserIDs(spec.UserIDs); err != nil {
			return nil, nil, nil, err
		}
	default:
		if tokens, err = testTokens(spec.Tokens); err != nil {
			return nil, nil, nil, err
		}
	}
	m := spec.Spec
	m.Audience = &rules.AudienceSpec{All: true}
	req, err := s.opt.Rules.Validate(m, time.Time{})
	var fe *rules.FieldError
	if errors.As(err, &fe) && fe.Code == "template_error" {
		return nil, nil, nil, message.FieldErrorf(fe.Code, fe.Field, "a test send has no audience row to fill template variables from: %s", fe.Message)
	} else if err != nil {
		return nil, nil, nil, err
	}
	// Its own display tag: a retried send that did arrive folds on the
	// device, and it folds with no broadcast nor another test send. Sent
	// as transactional (high priority): the tester looks at the phone now.
	var b [6]byte
	_, _ = rand.Read(b[:])
	msg = message.Engine(req.Message, message.WithClass("pushfan-test-"+hex.EncodeToString(b[:]), delivery.Of(model.ClassTransactional), time.Now()), false)
	personalize, variants, err := message.Personalizer(&model.Broadcast{Message: req.Message}, msg)
	if err != nil {
		return nil, nil, nil, message.FieldErrorf("template_error", "", "%v", err)
	}
	if len(spec.Locale) > 35 {
		return nil, nil, nil, message.FieldErrorf("invalid_locale", "locale", "locale %q is not a language tag", spec.Locale)
	}
	if variants != nil && personalize == nil {
		msg = variants.Messages[variants.Pick(fanout.Target{Locale: spec.Locale})]
	}
	if personalize != nil {
		// Templates without variables (validated above): one rendering.
		if msg, err = personalize(fanout.Target{}); err != nil {
			return nil, nil, nil, message.FieldErrorf("template_error", "", "the message does not render: %v", err)
		}
	}
	return msg, userIDs, tokens, nil
}

func testUserIDs(in []uint64) ([]uint64, error) {
	switch {
	case len(in) == 0:
		return nil, message.FieldErrorf("empty_value", "user_ids", "user_ids is empty: name at least one user")
	case len(in) > MaxTestTokens:
		return nil, message.FieldErrorf("too_many_user_ids", "user_ids", "user_ids has %d ids; a test send goes to at most %d tokens", len(in), MaxTestTokens)
	}
	seen := make(map[uint64]bool, len(in))
	out := make([]uint64, 0, len(in))
	for _, id := range in {
		if id == 0 {
			return nil, message.FieldErrorf("invalid_value", "user_ids", "user ids must be positive integers; got 0")
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// maxTokenLen is device_tokens.token's width.
const maxTokenLen = 512

func testTokens(in []string) ([]string, error) {
	switch {
	case len(in) == 0:
		return nil, message.FieldErrorf("empty_value", "tokens", "tokens is empty: name at least one device token")
	case len(in) > MaxTestTokens:
		return nil, message.FieldErrorf("too_many_tokens", "tokens", "tokens has %d tokens; a test send goes to at most %d", len(in), MaxTestTokens)
	}
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for i, t := range in {
		if t == "" || len(t) > maxTokenLen {
			return nil, message.FieldErrorf("invalid_value", "tokens", "tokens[%d] must be 1 to %d characters, got %d", i, maxTokenLen, len(t))
		}
		for j := 0; j < len(t); j++ {
			if c := t[j]; c <= ' ' || c > '~' {
				// FCM tokens are printable ASCII; anything else is a paste
				// gone wrong (a quote, a newline), and cannot be in the table.
				return nil, message.FieldErrorf("invalid_value", "tokens", "tokens[%d] has a character (byte %d) that no FCM token has", i, j)
			}
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, nil
}

// resolveUsers reads the users' valid tokens (as the audience rule does:
// a disabled user gets nothing) and reports those that have none.
func (s *Service) resolveUsers(ctx context.Context, store *repository.Store, ids []uint64) ([]TestResult, []SkippedUser, error) {
	dbctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	users, err := store.TestUsers(dbctx, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("test send: %w", err)
	}
	var results []TestResult
	var skipped []SkippedUser
	for _, u := range users {
		switch {
		case !u.Exists:
			skipped = append(skipped, SkippedUser{UserID: u.UserID, Reason: SkipUnknownUser})
		case !u.PushEnabled:
			skipped = append(skipped, SkippedUser{UserID: u.UserID, Reason: SkipPushDisabled})
		case len(u.Tokens) == 0:
			skipped = append(skipped, SkippedUser{UserID: u.UserID, Reason: SkipNoValidTokens})
		}
		if !u.Exists || !u.PushEnabled {
			continue
		}
		for _, t := range u.Tokens {
			results = append(results, TestResult{Token: t.Token, TokenID: t.TokenID, UserID: u.UserID, State: TokenValid})
		}
	}
	if len(results) > MaxTestTokens {
		return nil, nil, message.FieldErrorf("too_many_tokens", "user_ids", "these users have %d valid tokens; a test send goes to at most %d (name fewer users, or their tokens)", len(results), MaxTestTokens)
	}
	return results, skipped, nil
}

// resolveTokens looks raw tokens up. Every one is sent, known or not: an
// operator testing a device may hold a token pushfan has not seen yet.
func (s *Service) resolveTokens(ctx context.Context, store *repository.Store, tokens []string) ([]TestResult, error) {
	dbctx, cancel := context.WithTimeout(ctx, s.opt.DBTimeout)
	defer cancel()
	known, err := store.LookupTokens(dbctx, tokens)
	if err != nil {
		return nil, fmt.Errorf("test send: %w", err)
	}
	results := make([]TestResult, len(tokens))
	for i, t := range tokens {
		results[i] = TestResult{Token: t, State: TokenUnknown}
		if k, ok := known[t]; ok {
			results[i].TokenID, results[i].UserID, results[i].State = k.TokenID, k.UserID, TokenValid
			switch {
			case k.Invalidated:
				results[i].State = TokenInvalidated
			case k.Stale:
				// Sent all the same, as an invalidated one is: the
				// operator holds the device and asked for this token.
				results[i].State = TokenStale
			}
		}
	}
	return results, nil
}

// invalidateTested invalidates the dead tokens among results (indexes
// dead), one statement each so that each result says whether it was this
// send that invalidated it. The sends are done by now: a database error is
// logged, not returned, so the caller still gets what FCM answered.
func (s *Service) invalidateTested(ctx context.Context, store *repository.Store, results []TestResult, dead []int) {
	if len(dead) == 0 {
		return
	}
	// The caller's deadline may have been spent on the sends; the
	// invalidations get their own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opt.DBTimeout)
	defer cancel()
	at := s.now()
	for _, i := range dead {
		r := &results[i]
		n, err := store.InvalidateTokens(ctx, []repository.Invalidation{{TokenID: r.TokenID, Token: r.Token, Reason: r.Code}}, at)
		if err != nil {
			s.log.ErrorContext(ctx, "test send: invalidating a dead token failed; the next broadcast to it will find it dead again", "token", fanout.TokenHint(r.Token), "code", r.Code, "err", err)
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
func (s *Service) TestSendBroadcast(ctx context.Context, id uint64, to TestRecipients, by string) (*TestReport, error) {
	b, err := s.reads.Get(ctx, id)
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
	spec.Track = m.Track
	return s.TestSend(ctx, spec, by)
}
