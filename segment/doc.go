// Package segment is the catalog of saved segments (issue 42;
// docs/segments.md): named filters over the users and tokens (package
// segment/filter), each edit a new version, every version kept, counted
// live as the console builds them.
//
// Catalog checks every write before the store sees it: the name
// (NamePattern), the description (at most MaxDescription characters) and
// the filter, parsed against the fields of the store's schema, so that a
// segment saved is one its deployment can send to. Every refusal is a
// *FieldError naming the request's field as the API shows it (name,
// description, filter.and[2].op), which the API answers with a 400; an
// unknown name is ErrNotFound, a live name taken ErrExists.
//
// Preview counts a filter: exactly on a small tokens table, and on a big
// one the estimate at once (repository.EstimateSegment: 100,000 user ids
// read whatever the size), the caller asking again with exact for the
// exact count, which is bounded by a timeout.
package segment
