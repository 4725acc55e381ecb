package message

import (
	"net/url"
	"strings"
)

// A templated URL field (an image, webpush's fcm_options.link) fixes its
// scheme and host before its first action, and every rendered value must
// keep them: otherwise a variable moves the link to another host, as
// "https://example.com{{.p}}" does with p = "@evil.com/x" (evil.com is the
// host, example.com the user name). The static text is what the operator
// wrote and reviewed; the variables come from the audience's rows.

// origin is the scheme and host a templated URL's static prefix fixes.
type origin struct {
	scheme, host string
	// inHost: the first action stands inside the host, so no rendered
	// value can keep it (a request is refused; see actionInHost).
	inHost bool
}

// templateOrigin is the origin of src, a templated URL whose static prefix
// (static, the text before the first "{{") the link rule has checked to be
// a URL with a scheme and a host.
func templateOrigin(src, static string) *origin {
	u, err := url.Parse(static)
	if err != nil {
		return &origin{inHost: true} // unreachable: the static prefix was checked
	}
	return &origin{scheme: u.Scheme, host: u.Host, inHost: actionInHost(src, static)}
}

// actionInHost reports whether src's first action is part of its host. The
// host is fixed when a '/', '?' or '#' ends it before the action. When the
// action follows it directly ("https://example.com{{.path}}"), the host is
// pinned as written and each rendered value is checked; but when the text
// before the action ends where a host cannot ('.', ':', '@', '-', '[') or
// the text after it goes on with the host (".example.com/"), the action is
// inside the host, and no value could keep it.
func actionInHost(src, static string) bool {
	_, authority, ok := strings.Cut(static, "//")
	if !ok || authority == "" {
		return true
	}
	if strings.ContainsAny(authority, "/?#") {
		return false
	}
	if strings.ContainsAny(authority[len(authority)-1:], ".:@-[") {
		return true
	}
	rest := src[len(static)+len("{{"):]
	end := strings.Index(rest, "}}")
	if end < 0 {
		return false // does not parse: the template check names the field
	}
	after := rest[end+len("}}"):]
	if end > 0 && rest[end-1] == '-' { // "-}}" trims the space after it
		after = strings.TrimLeft(after, " \t\r\n")
	}
	return after != "" && !strings.HasPrefix(after, "{{") && !strings.ContainsAny(after[:1], "/?#")
}

// check refuses a rendered value s whose scheme or host is not o's.
// Scheme and host compare without regard to case, as URLs do.
func (o *origin) check(p path, s string) error {
	u, err := url.Parse(s)
	if err == nil && strings.EqualFold(u.Scheme, o.scheme) && strings.EqualFold(u.Host, o.host) {
		return nil
	}
	return FieldErrorf("invalid_value", p.name, "%s must stay on %s://%s, the scheme and host its template fixes, but rendered %q", p.name, o.scheme, o.host, s)
}

// checkLinkOrigins refuses a request whose templated URL has its first
// action inside the host, naming the field.
func checkLinkOrigins(p [4]override) error {
	for _, o := range p {
		for _, l := range o.leaves {
			if l.origin != nil && l.origin.inHost {
				return FieldErrorf("invalid_value", l.path.name, "%s: the first template action is inside the host, which a templated URL must fix; end the host with / before it, as in https://example.com/{{.id}}, got %q", l.path.name, l.src)
			}
		}
	}
	return nil
}
