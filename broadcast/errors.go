package broadcast

import (
	"errors"
	"fmt"

	"pushfan/broadcast/instance"
	"pushfan/broadcast/reads"
	"pushfan/lease"
)

// Errors the HTTP layer maps to status codes.
var (
	// ErrNotFound: no broadcast with that id (the reads' own error: a
	// cancel, a release or a resend of an unknown id answers it too).
	ErrNotFound = reads.ErrNotFound
	// ErrFinished: the broadcast already ended; it cannot be canceled.
	ErrFinished = errors.New("broadcast already finished")
	// ErrShuttingDown: the service is stopping and takes no new broadcasts
	// (one error with the test sends', which stop with it).
	ErrShuttingDown = instance.ErrShuttingDown
	// ErrIdempotencyConflict: the Idempotency-Key was used for another request.
	ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")
)

// unavailable turns the refusal of an instance older than the database's
// schema (lease.ErrOutdated: a newer release is migrating it) into
// ErrShuttingDown, which a client retries on another instance.
func unavailable(err error) error {
	if errors.Is(err, lease.ErrOutdated) {
		return fmt.Errorf("%w: %w", ErrShuttingDown, err)
	}
	return err
}
