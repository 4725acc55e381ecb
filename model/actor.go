package model

// Role is what a caller may do. The roles are ordered: each may do all
// that the roles before it may, and more.
//   - viewer reads (every GET, and the POSTs that only count: previews);
//   - sender also sends, cancels, resends, test-sends and edits segments
//     and consents;
//   - approver also releases held broadcasts;
//   - admin also manages API keys, webhooks, reloads and settings, and
//     reads the audit trail.
type Role string

// The roles, in rising order.
const (
	RoleViewer   Role = "viewer"
	RoleSender   Role = "sender"
	RoleApprover Role = "approver"
	RoleAdmin    Role = "admin"
)

// Roles lists every role in rising order.
var roles = [...]Role{RoleViewer, RoleSender, RoleApprover, RoleAdmin}

// Roles returns every role in rising order.
func Roles() []Role { return roles[:] }

// ParseRole reads a role's name; ok is false for anything else.
func ParseRole(s string) (r Role, ok bool) {
	for _, r := range roles {
		if string(r) == s {
			return r, true
		}
	}
	return "", false
}

func (r Role) rank() int {
	for i, x := range roles {
		if x == r {
			return i
		}
	}
	return -1
}

// Includes reports whether r may do what need may: r is need or above it.
// An unknown role includes nothing.
func (r Role) Includes(need Role) bool { return r.rank() >= 0 && r.rank() >= need.rank() }

// ActorKind is what kind of caller acted.
type ActorKind string

// The kinds of actor: a person signed in through the OIDC provider, an
// API key kept in the database, or a token from the environment
// (PUSHFAN_ADMIN_TOKENS, the internal token).
const (
	ActorPerson ActorKind = "person"
	ActorKey    ActorKind = "key"
	ActorToken  ActorKind = "token"
)

// Actor is who did something, as the audit trail and the broadcasts name
// them: a person's ID is the provider's subject (sub) and Name their
// email or name; a key's ID is its id; a token's ID and Name are the
// token's name.
type Actor struct {
	Kind ActorKind `json:"kind"`
	ID   string    `json:"id"`
	Name string    `json:"name"`
}

// Same reports whether a and b are the same person, key or token (the
// four-eyes rule compares actors, not names: two people may share one).
func (a Actor) Same(b Actor) bool { return a.Kind == b.Kind && a.ID == b.ID }
