package model

// SchemaMapping maps the built-in audiences (all, user_ids, resends) and
// dead-token write-back onto a deployment's own tables: the `schema:`
// section of the YAML file. The zero value means pushfan's bundled users
// and device_tokens tables.
type SchemaMapping struct {
	Users  *UsersMapping  `yaml:"users"`
	Tokens *TokensMapping `yaml:"tokens"`
}

// Mapped reports whether the section is present at all.
func (m SchemaMapping) Mapped() bool { return m.Users != nil || m.Tokens != nil }

// UsersMapping names the app's users table and its columns.
type UsersMapping struct {
	Table       string `yaml:"table"`        // "table" or "db.table"
	ID          string `yaml:"id"`           // the user id the tokens table refers to
	PushEnabled string `yaml:"push_enabled"` // SQL condition: the user accepts pushes
	Locale      string `yaml:"locale"`       // optional column
	Timezone    string `yaml:"timezone"`     // optional column of IANA zone names
}

// TokensMapping names the app's device-token table and its columns.
type TokensMapping struct {
	Table    string `yaml:"table"`
	ID       string `yaml:"id"`       // unique increasing integer: pages and chunks follow it
	UserID   string `yaml:"user_id"`  // the user's id (UsersMapping.ID)
	Token    string `yaml:"token"`    // the FCM registration token
	Valid    string `yaml:"valid"`    // SQL condition: the token may be sent to
	Platform string `yaml:"platform"` // optional column
	// App is an optional column naming each token's app (docs/apps.md),
	// for one table holding the tokens of several apps.
	App string `yaml:"app"`
	// LastSeen is an optional date/time column the app sets on every
	// token refresh: PUSHFAN_STALE_AFTER reads it (the bundled table's is
	// updated_at), and needs it on a mapped table.
	LastSeen string `yaml:"last_seen"`
	// OnDead is the statement that writes a dead token back, run once per
	// dead token in the checkpoint's transaction, with :id, :token, :code.
	OnDead string `yaml:"on_dead"`
}
