package model

// SchemaMapping maps the built-in audiences (all, user_ids, resends) and
// dead-token write-back onto a deployment's own tables: the `schema:`
// section of the YAML file. The zero value means pushfan's bundled users
// and device_tokens tables.
type SchemaMapping struct {
	Users  *UsersMapping  `yaml:"users"`
	Tokens *TokensMapping `yaml:"tokens"`
}

// Mapped reports whether the section maps the tables: present, and more
// than the bundled users table's attributes (users: {attributes: ...}
// alone declares columns an operator added to pushfan's own users table).
func (m SchemaMapping) Mapped() bool {
	if m.Tokens != nil {
		return true
	}
	if m.Users == nil {
		return false
	}
	u := m.Users
	return u.Table != "" || u.ID != "" || u.PushEnabled != "" || u.Locale != "" || u.Timezone != ""
}

// UserAttributes are the users' attribute columns the schema declares (for
// segments' attributes.NAME fields), nil for none.
func (m SchemaMapping) UserAttributes() map[string]Attribute {
	if m.Users == nil {
		return nil
	}
	return m.Users.Attributes
}

// UsersMapping names the app's users table and its columns.
type UsersMapping struct {
	Table       string `yaml:"table"`        // "table" or "db.table"
	ID          string `yaml:"id"`           // the user id the tokens table refers to
	PushEnabled string `yaml:"push_enabled"` // SQL condition: the user accepts pushes
	Locale      string `yaml:"locale"`       // optional column
	Timezone    string `yaml:"timezone"`     // optional column of IANA zone names
	// Attributes are columns of the users table a segment may filter on
	// (attributes.NAME), by name: {plan: {column: plan_code, type: string}}.
	Attributes map[string]Attribute `yaml:"attributes"`
}

// Attribute is one users' column a segment may filter on, and its type:
// string, int, bool or date.
type Attribute struct {
	Column string `yaml:"column"`
	Type   string `yaml:"type"`
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
	// AppVersion is an optional column of the app's version on the
	// device ("5.10.0"): a segment's app_version field (the bundled
	// table's is app_version).
	AppVersion string `yaml:"app_version"`
	// OnDead is the statement that writes a dead token back, run once per
	// dead token in the checkpoint's transaction, with :id, :token, :code.
	OnDead string `yaml:"on_dead"`
}
