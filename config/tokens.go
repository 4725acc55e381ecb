package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"pushfan/model"
)

// Roles a token can have (model.Role: viewer, sender, approver, admin).
const (
	RoleViewer   = string(model.RoleViewer)
	RoleSender   = string(model.RoleSender)
	RoleApprover = string(model.RoleApprover)
	RoleAdmin    = string(model.RoleAdmin)
)

// isRole reports whether s names a role.
func isRole(s string) bool { _, ok := model.ParseRole(s); return ok }

// AdminToken is one parsed entry of PUSHFAN_ADMIN_TOKENS. Only the SHA-256
// of the secret is kept: a token configured as a hash never exists in clear
// in the process, and clear ones are hashed at start-up.
type AdminToken struct {
	Name string
	Role string
	Hash [sha256.Size]byte
	// Apps are the apps the token may use (name:role:secret:app1|app2);
	// nil: every app.
	Apps []string
}

// splitApps cuts a trailing ":app1|app2" off an entry's secret: the
// fourth field of name:role:secret:apps. A clear secret may hold ':'
// itself, so the field is taken only when everything after the last ':'
// reads as app names; a secret ending that way must be given as its
// sha256: hash.
func splitApps(secret string) (string, []string) {
	i := strings.LastIndexByte(secret, ':')
	if i < 0 {
		return secret, nil
	}
	rest, list := secret[:i], secret[i+1:]
	if strings.HasPrefix(secret, "sha256:") && i == len("sha256:")-1 {
		return secret, nil // sha256:<hex>, no apps
	}
	apps := strings.Split(list, "|")
	for _, a := range apps {
		if !ValidAppName(a) {
			return secret, nil
		}
	}
	return rest, apps
}

var tokenName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ParseAdminTokens parses PUSHFAN_ADMIN_TOKENS entries. An entry is either
// a bare secret (named admin-N, role admin: the environment's tokens
// bootstrap a deployment) or name:role:secret[:apps],
// where the secret may be given as sha256:<64 hex digits> and apps limits
// the token to those apps ("consumer|partner"). Errors never quote a
// secret.
func ParseAdminTokens(entries []string) ([]AdminToken, error) {
	var out []AdminToken
	seen := map[string]bool{}
	for i, e := range entries {
		t := AdminToken{Name: fmt.Sprintf("admin-%d", i+1), Role: RoleAdmin}
		secret := e
		if parts := strings.SplitN(e, ":", 3); len(parts) == 3 && isRole(parts[1]) {
			t.Name, t.Role, secret = parts[0], parts[1], parts[2]
			secret, t.Apps = splitApps(secret)
			if !tokenName.MatchString(t.Name) {
				return nil, fmt.Errorf("entry #%d: name must be 1-64 letters, digits, '.', '_' or '-'", i+1)
			}
		} else if len(parts) == 3 && strings.Count(e, ":") >= 2 && !strings.HasPrefix(e, "sha256:") {
			return nil, fmt.Errorf("entry #%d: role must be %s, %s, %s or %s (format name:role:secret)", i+1, RoleViewer, RoleSender, RoleApprover, RoleAdmin)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("entry #%d: name %q is used twice", i+1, t.Name)
		}
		seen[t.Name] = true
		if hexHash, ok := strings.CutPrefix(secret, "sha256:"); ok {
			raw, err := hex.DecodeString(hexHash)
			if err != nil || len(raw) != sha256.Size {
				return nil, fmt.Errorf("entry #%d (%s): sha256: must be followed by 64 hex digits", i+1, t.Name)
			}
			copy(t.Hash[:], raw)
		} else {
			if len(secret) < 16 {
				return nil, fmt.Errorf("entry #%d (%s): the secret is shorter than 16 characters", i+1, t.Name)
			}
			t.Hash = sha256.Sum256([]byte(secret))
		}
		out = append(out, t)
	}
	return out, nil
}
