package broadcast

import "errors"

// Errors the HTTP layer maps to status codes.
var (
	// ErrNotFound: no broadcast with that id.
	ErrNotFound = errors.New("broadcast not found")
	// ErrFinished: the broadcast already ended; it cannot be canceled.
	ErrFinished = errors.New("broadcast already finished")
	// ErrShuttingDown: the service is stopping and takes no new broadcasts.
	ErrShuttingDown = errors.New("service is shutting down")
	// ErrIdempotencyConflict: the Idempotency-Key was used for another request.
	ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")
)
