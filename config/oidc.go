package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// OIDC is console sign-in through an OpenID Connect provider: the
// provider (Issuer), pushfan's registration there (ClientID,
// ClientSecret), the ID token's claim that lists a person's groups
// (RolesClaim) and what role each group gives (Roles, from the YAML:
// `oidc: {roles: {"push-admins": admin, "*": viewer}}`, "*" being anyone
// the provider signed in). No Issuer: no OIDC sign-in.
type OIDC struct {
	Issuer       string            `yaml:"issuer"`
	ClientID     string            `yaml:"client_id"`
	ClientSecret string            `yaml:"-"` // a secret: the environment only
	RolesClaim   string            `yaml:"roles_claim"`
	Roles        map[string]string `yaml:"roles"`
}

// AnyGroup in OIDC.Roles matches anyone the provider signed in.
const AnyGroup = "*"

// On reports whether OIDC sign-in is configured.
func (o OIDC) On() bool { return o.Issuer != "" }

// CallbackPath is where the provider sends the browser back, under
// PUSHFAN_PUBLIC_URL: the redirect URI to register with the provider.
const CallbackPath = "/console/oidc/callback"

// RedirectURL is the redirect URI pushfan sends the provider:
// PUSHFAN_PUBLIC_URL + CallbackPath.
func (c *Config) RedirectURL() string {
	return strings.TrimSuffix(c.Events.PublicURL, "/") + CallbackPath
}

// validateOIDC checks the OIDC settings together: with an issuer, a
// client id, a public URL (the redirect URI's base) and at least one
// group's role are needed; without one, none of them may be set (a
// half-configured sign-in is a mistake, not a choice).
func (c *Config) validateOIDC(bad func(name, format string, args ...any)) {
	o := c.OIDC
	if !o.On() {
		if o.ClientID != "" || o.ClientSecret != "" || len(o.Roles) > 0 {
			bad("PUSHFAN_OIDC_ISSUER", "must be set when PUSHFAN_OIDC_CLIENT_ID, PUSHFAN_OIDC_CLIENT_SECRET or oidc.roles is")
		}
		if !c.HTTP.TokenSignIn {
			bad("PUSHFAN_TOKEN_SIGNIN", "false leaves the console with no way to sign in: set PUSHFAN_OIDC_ISSUER too")
		}
		return
	}
	u, err := url.Parse(o.Issuer)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		bad("PUSHFAN_OIDC_ISSUER", "%q is not an http(s) URL like https://login.example.com", o.Issuer)
	}
	if o.ClientID == "" {
		bad("PUSHFAN_OIDC_CLIENT_ID", "must be set with PUSHFAN_OIDC_ISSUER: the client id pushfan is registered under at the provider")
	}
	if c.Events.PublicURL == "" {
		bad("PUSHFAN_PUBLIC_URL", "must be set with PUSHFAN_OIDC_ISSUER: the provider sends the browser back to PUSHFAN_PUBLIC_URL%s", CallbackPath)
	}
	if o.RolesClaim == "" {
		bad("PUSHFAN_OIDC_ROLES_CLAIM", "must name the ID token's claim that lists a person's groups, such as groups")
	}
	if len(o.Roles) == 0 {
		bad("oidc.roles", `must map at least one group to a role, such as {"push-admins": admin}: without it nobody can sign in`)
	}
	groups := make([]string, 0, len(o.Roles))
	for g := range o.Roles {
		groups = append(groups, g)
	}
	slices.Sort(groups) // errors in a stable order
	for _, g := range groups {
		if strings.TrimSpace(g) == "" {
			bad("oidc.roles", "has an empty group name")
			continue
		}
		if !isRole(o.Roles[g]) {
			bad(fmt.Sprintf("oidc.roles[%q]", g), "must be viewer, sender, approver or admin, got %q", o.Roles[g])
		}
	}
}
