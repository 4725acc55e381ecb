package segment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"pushfan/model"
	"pushfan/repository"
	"pushfan/segment/filter"
)

// NamePattern is what a segment may be called: lower-case letters,
// digits, - and _, starting with a letter, at most 64 (a URL's path
// segment as it is, and segments.name's width).
var NamePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// MaxDescription is a description's length in characters
// (segment_versions.description).
const MaxDescription = 512

// maxFilterBytes is a filter's size as stored (segment_versions.filter, a
// TEXT).
const maxFilterBytes = 65535

// ErrNotFound: no live segment has the name (or no such version).
var ErrNotFound = errors.New("segment not found")

// ErrExists: a live segment has the name a new one asks for.
var ErrExists = errors.New("a segment with this name exists")

// FieldError is a refusal of one request field: Field names it as the API
// shows it (name, description, filter.and[2].op), Code is stable
// snake_case.
type FieldError struct {
	Field   string
	Code    string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

func refuse(field, code, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Catalog is the saved segments over the store.
type Catalog struct {
	store *repository.Store
	opts  Options
}

// Options tune the counts; zero values take the defaults.
type Options struct {
	// SmallTable is the tokens' largest id up to which a preview counts
	// exactly at once (default 1,000,000).
	SmallTable uint64
	// ExactTimeout bounds an exact count (default 60 s).
	ExactTimeout time.Duration
	// Sample is how many user ids a preview shows (default 10).
	Sample int
	// DBTimeout bounds every other call to the store: a write, a read,
	// the estimate (default 5 s).
	DBTimeout time.Duration
}

// New returns the catalog of the segments in store, whose schema's fields
// their filters name.
func New(store *repository.Store, o Options) *Catalog {
	if o.SmallTable == 0 {
		o.SmallTable = 1_000_000
	}
	if o.ExactTimeout <= 0 {
		o.ExactTimeout = 60 * time.Second
	}
	if o.Sample <= 0 {
		o.Sample = 10
	}
	if o.DBTimeout <= 0 {
		o.DBTimeout = 5 * time.Second
	}
	return &Catalog{store: store, opts: o}
}

// Write is a segment's create or update: Description nil on an update
// keeps the current one; By is who writes it, At when (zero: now).
type Write struct {
	Name        string
	Description *string
	Filter      json.RawMessage
	By          string
	At          time.Time
}

// Fields are the fields a filter may name here: the store's schema's.
func (c *Catalog) Fields() filter.Fields { return c.store.Schema().SegmentFields() }

// Create saves a new segment at version 1.
func (c *Catalog) Create(ctx context.Context, w Write) (model.Segment, error) {
	e, err := c.check(w)
	if err != nil {
		return model.Segment{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.DBTimeout)
	defer cancel()
	seg, err := c.store.CreateSegment(ctx, w.Name, e)
	return seg, domainError(w.Name, err)
}

// Update saves the next version of the live segment w.Name.
func (c *Catalog) Update(ctx context.Context, w Write) (model.Segment, error) {
	e, err := c.check(w)
	if err != nil {
		return model.Segment{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.DBTimeout)
	defer cancel()
	seg, err := c.store.UpdateSegment(ctx, w.Name, e)
	return seg, domainError(w.Name, err)
}

// Get reads the live segment called name with its versions.
func (c *Catalog) Get(ctx context.Context, name string) (model.Segment, error) {
	if err := checkName(name); err != nil {
		return model.Segment{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.DBTimeout)
	defer cancel()
	seg, err := c.store.Segment(ctx, name)
	return seg, domainError(name, err)
}

// List lists the live segments by name.
func (c *Catalog) List(ctx context.Context) ([]model.Segment, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.DBTimeout)
	defer cancel()
	return c.store.Segments(ctx)
}

// Delete deletes the live segment called name; its versions stay.
func (c *Catalog) Delete(ctx context.Context, name string, at time.Time) error {
	if err := checkName(name); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.DBTimeout)
	defer cancel()
	return domainError(name, c.store.DeleteSegment(ctx, name, at))
}

// Version reads one version of the live segment called name.
func (c *Catalog) Version(ctx context.Context, name string, version int) (model.SegmentVersion, error) {
	if err := checkName(name); err != nil {
		return model.SegmentVersion{}, err
	}
	if version < 1 {
		return model.SegmentVersion{}, refuse("version", "invalid_version", "version %d: versions count from 1", version)
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.DBTimeout)
	defer cancel()
	v, err := c.store.SegmentVersion(ctx, name, version)
	return v, domainError(name, err)
}

// Current is the live segment called name as a broadcast is sent to it:
// its current version and filter.
func (c *Catalog) Current(ctx context.Context, name string) (model.SegmentRef, error) {
	if err := checkName(name); err != nil {
		return model.SegmentRef{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.DBTimeout)
	defer cancel()
	ref, err := c.store.SegmentCurrent(ctx, name)
	return ref, domainError(name, err)
}

// check refuses a write's name, description or filter, naming the field;
// it returns the edit to store, its filter compacted.
func (c *Catalog) check(w Write) (repository.SegmentEdit, error) {
	raw, err := CheckWrite(w, c.Fields())
	if err != nil {
		return repository.SegmentEdit{}, err
	}
	return repository.SegmentEdit{Description: w.Description, Filter: raw, By: w.By, At: w.At}, nil
}

// CheckFilter parses raw against the fields and returns it compacted, as
// it is stored; a mistake is a *FieldError at its path (filter.or[1].value).
func (c *Catalog) CheckFilter(raw json.RawMessage) (json.RawMessage, error) {
	return CheckFilter(raw, c.Fields())
}

// CheckWrite refuses a write's name, description or filter (against
// fields), naming the field; it returns the filter compacted, as it is
// stored. The catalog's check, exported for the API's contract tests.
func CheckWrite(w Write, fields filter.Fields) (json.RawMessage, error) {
	if err := checkName(w.Name); err != nil {
		return nil, err
	}
	if w.Description != nil {
		d := *w.Description
		if !utf8.ValidString(d) {
			return nil, refuse("description", "invalid_description", "the description is not valid UTF-8")
		}
		if n := utf8.RuneCountInString(d); n > MaxDescription {
			return nil, refuse("description", "invalid_description", "%d characters; a description has at most %d", n, MaxDescription)
		}
	}
	return CheckFilter(w.Filter, fields)
}

// CheckFilter parses raw against fields and returns it compacted; a
// mistake is a *FieldError at its path (filter.or[1].value).
func CheckFilter(raw json.RawMessage, fields filter.Fields) (json.RawMessage, error) {
	if _, err := filter.Parse(raw, fields, "filter"); err != nil {
		var fe *filter.Error
		if errors.As(err, &fe) {
			return nil, refuse(fe.Path, "invalid_filter", "%s", fe.Message)
		}
		return nil, refuse("filter", "invalid_filter", "%v", err)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, refuse("filter", "invalid_filter", "not valid JSON: %v", err)
	}
	if b.Len() > maxFilterBytes {
		return nil, refuse("filter", "invalid_filter", "%d bytes as JSON; a filter has at most %d", b.Len(), maxFilterBytes)
	}
	return b.Bytes(), nil
}

// CheckName refuses a name no segment may have.
func CheckName(name string) error { return checkName(name) }

func checkName(name string) error {
	if name == "" {
		return refuse("name", "missing_field", "name is required: lower-case letters, digits, - and _, starting with a letter, at most 64")
	}
	if !NamePattern.MatchString(name) {
		return refuse("name", "invalid_name", "%s is not a segment name: lower-case letters, digits, - and _, starting with a letter, at most 64", strconv.Quote(clip(name)))
	}
	return nil
}

func clip(s string) string {
	if len(s) > 70 {
		return s[:70] + "…"
	}
	return s
}

// domainError turns the store's sentinels into the catalog's.
func domainError(name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, repository.ErrNotFound):
		return fmt.Errorf("segment %q: %w", name, ErrNotFound)
	case errors.Is(err, repository.ErrSegmentExists):
		return fmt.Errorf("segment %q: %w", name, ErrExists)
	}
	return err
}
