package testsend

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"pushfan/broadcast/message"
	"pushfan/broadcast/rules"
	"pushfan/fanout"
	"pushfan/model"
)

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

// validateTest checks a test send's request: the message by the broadcast
// rules (as a message to the built-in audience: no template variables,
// for there is no audience row to fill them from), and who it is for.
func (ts *Tester) validateTest(spec TestSpec, delivery model.DeliveryDefaults) (msg *fanout.Message, userIDs []uint64, tokens []string, err error) {
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
			return nil, nil, nil, fieldError("not_applicable", f.name, "%s does not apply to a test send, which goes now to the user_ids or tokens it names", f.name)
		}
	}
	switch {
	case spec.UserIDs != nil && spec.Tokens != nil:
		return nil, nil, nil, fieldError("invalid_value", "tokens", "set exactly one of user_ids or tokens, not both")
	case spec.UserIDs == nil && spec.Tokens == nil:
		return nil, nil, nil, fieldError("missing_field", "user_ids", "a test send needs user_ids (their valid tokens) or tokens (raw device tokens), at most %d tokens", MaxTestTokens)
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
	req, err := ts.opt.Rules.Validate(m, time.Time{})
	var fe *rules.FieldError
	if errors.As(err, &fe) && fe.Code == "template_error" {
		return nil, nil, nil, fieldError(fe.Code, fe.Field, "a test send has no audience row to fill template variables from: %s", fe.Message)
	} else if err != nil {
		return nil, nil, nil, err
	}
	// Its own display tag: a retried send that did arrive folds on the
	// device, and it folds with no broadcast nor another test send. Sent
	// as transactional (high priority): the tester looks at the phone now.
	var b [6]byte
	_, _ = rand.Read(b[:])
	msg = message.Engine(req.Message, message.WithClass("pushfan-test-"+hex.EncodeToString(b[:]), delivery.Of(model.ClassTransactional), time.Now()), false)
	personalize, variants, err := message.Personalizer(&model.Broadcast{Submission: model.Submission{Message: req.Message}}, msg)
	if err != nil {
		return nil, nil, nil, fieldError("template_error", "", "%v", err)
	}
	if len(spec.Locale) > 35 {
		return nil, nil, nil, fieldError("invalid_locale", "locale", "locale %q is not a language tag", spec.Locale)
	}
	if variants != nil && personalize == nil {
		msg = variants.Messages[variants.Pick(fanout.Target{Locale: spec.Locale})]
	}
	if personalize != nil {
		// Templates without variables (validated above): one rendering.
		if msg, err = personalize(fanout.Target{}); err != nil {
			return nil, nil, nil, fieldError("template_error", "", "the message does not render: %v", err)
		}
	}
	return msg, userIDs, tokens, nil
}

func testUserIDs(in []uint64) ([]uint64, error) {
	switch {
	case len(in) == 0:
		return nil, fieldError("empty_value", "user_ids", "user_ids is empty: name at least one user")
	case len(in) > MaxTestTokens:
		return nil, fieldError("too_many_user_ids", "user_ids", "user_ids has %d ids; a test send goes to at most %d tokens", len(in), MaxTestTokens)
	}
	seen := make(map[uint64]bool, len(in))
	out := make([]uint64, 0, len(in))
	for _, id := range in {
		if id == 0 {
			return nil, fieldError("invalid_value", "user_ids", "user ids must be positive integers; got 0")
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
		return nil, fieldError("empty_value", "tokens", "tokens is empty: name at least one device token")
	case len(in) > MaxTestTokens:
		return nil, fieldError("too_many_tokens", "tokens", "tokens has %d tokens; a test send goes to at most %d", len(in), MaxTestTokens)
	}
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for i, t := range in {
		if t == "" || len(t) > maxTokenLen {
			return nil, fieldError("invalid_value", "tokens", "tokens[%d] must be 1 to %d characters, got %d", i, maxTokenLen, len(t))
		}
		for j := 0; j < len(t); j++ {
			if c := t[j]; c <= ' ' || c > '~' {
				// FCM tokens are printable ASCII; anything else is a paste
				// gone wrong (a quote, a newline), and cannot be in the table.
				return nil, fieldError("invalid_value", "tokens", "tokens[%d] has a character (byte %d) that no FCM token has", i, j)
			}
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, nil
}

func fieldError(code, field, format string, args ...any) *rules.FieldError {
	return message.FieldErrorf(code, field, format, args...)
}
