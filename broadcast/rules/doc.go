// Package rules holds a broadcast's request rules: Spec, the shape a
// request body or a cron job gives a broadcast (its JSON is the API's),
// and Rules.Validate, which checks a Spec into a Request or answers a
// *FieldError naming the broken rule (message size, reserved data keys,
// templates, audience binding, send_at, class and pace, local time and
// quiet hours, A/B variants, the app, the frequency cap). Every entry
// point goes through them: the API's submits, previews and test sends,
// and the cron jobs (Rules.JobRequest). They read no database: a named
// audience is bound against its compiled definition, checked at start-up.
//
// The message itself (overrides, localized variants, templates) is
// package broadcast/message; package broadcast stores the Request.
package rules
