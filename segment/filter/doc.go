// Package filter is the language of segments' filters (issue 42; docs/segments.md): a
// JSON tree of and, or and not over conditions {field, op, value} on a
// target's columns (platform, locale, timezone, app, last_seen,
// app_version, user_id, and the user attributes the schema declares).
//
// Parse checks a filter against the fields a deployment has, naming the
// path of every mistake (filter.and[2].op) so the API answers a 400 that
// says where; Compile turns a checked filter into one SQL condition with
// bound parameters only: the column expressions come from the schema
// mapping (package repository), never from the request; Match evaluates
// it in Go over one target, with the same meaning (a test's oracle).
//
// The meaning, the same in SQL and in Go: a condition on a value the
// target does not have (NULL) does not hold, and ne, nin, not_within and
// "not" are the negations of eq, in, within and the filter under them,
// so they do hold there ("platform ne ios" includes a token whose
// platform is unknown). Strings compare as their column's collation
// compares them (MariaDB's default is case-insensitive, so "Android" eq
// "android"); Match compares bytes, which is the same for the lower-case
// values platforms and locales have.
package filter
