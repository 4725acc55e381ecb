package broadcast

import "errors"

// Errors the HTTP layer maps to status codes.
var (
	// ErrNotFound: no broadcast with that id (wraps repository.ErrNotFound).
	ErrNotFound = errors.New("broadcast not found")
	// ErrFinished: the broadcast already ended; it cannot be canceled.
	ErrFinished = errors.New("broadcast already finished")
	// ErrShuttingDown: the service is stopping and takes no new broadcasts.
	ErrShuttingDown = errors.New("service is shutting down")
)

// errCanceledByAdmin is the cause of a run stopped through Cancel.
var errCanceledByAdmin = errors.New("canceled by an admin")

// errShutdown is the cause of a run stopped because the service stops.
var errShutdown = errors.New("pushfan shut down while the broadcast was running")
