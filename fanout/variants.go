package fanout

import (
	"errors"
	"fmt"
	"math"
)

// Variants are a few alternative messages of one Run (a localized
// broadcast's languages): Pick chooses one per target, by index into Names.
//
// The engine calls Pick once per target as it reads it (in the producer,
// never concurrently), prepares each of Messages once for the Run rather
// than once per target, and counts the targets sent per variant in
// Committed.Variants. With a Personalize, that builds the message itself
// (its templates per variant) and Messages may be nil: Pick then only
// counts.
type Variants struct {
	Names    []string   // Committed.Variants keys, by index
	Messages []*Message // Messages[i] is Names[i]'s message; ignored with a Personalize
	Pick     func(Target) int
}

// noVariant marks a target whose Pick returned no valid index: it fails
// with CodeMessage and counts under no variant.
const noVariant = math.MaxUint16

func (v *Variants) check(personalized bool) error {
	switch {
	case v.Pick == nil || len(v.Names) == 0:
		return errors.New("fanout: variants need names and a Pick")
	case len(v.Names) >= noVariant:
		return fmt.Errorf("fanout: %d variants; at most %d", len(v.Names), noVariant-1)
	case !personalized && len(v.Messages) != len(v.Names):
		return fmt.Errorf("fanout: %d variant names for %d messages", len(v.Names), len(v.Messages))
	}
	return nil
}

// prepareVariants prepares job's variant messages once for the run: nil
// when it has none, or a Personalize builds each target's message.
func (e *Engine) prepareVariants(job Job) ([]Prepared, error) {
	v := job.Variants
	if v == nil {
		return nil, nil
	}
	if err := v.check(job.Personalize != nil); err != nil {
		return nil, err
	}
	if job.Personalize != nil {
		return nil, nil
	}
	out := make([]Prepared, len(v.Messages))
	for i, m := range v.Messages {
		if m == nil {
			return nil, fmt.Errorf("fanout: variant %q has no message", v.Names[i])
		}
		p, err := e.sender.Prepare(m)
		if err != nil {
			return nil, &ErrFatal{Outcome: Outcome{Class: Fatal, Code: CodeMessage, Detail: fmt.Sprintf("variant %s: %v", v.Names[i], err)}}
		}
		out[i] = p
	}
	return out, nil
}

// pickAll records the variant of each of pg's targets.
func (v *Variants) pickAll(pg *page, ts []Target) {
	pg.names = v.Names
	pg.variant = make([]uint16, len(ts))
	for i, t := range ts {
		k := v.Pick(t)
		if k < 0 || k >= len(v.Names) {
			k = noVariant
		}
		pg.variant[i] = uint16(k)
	}
}

// variant is the index of it's variant, or -1 when the run has none.
func (it *item) variant() int {
	if it.pg.variant == nil {
		return -1
	}
	return int(it.pg.variant[it.idx])
}
