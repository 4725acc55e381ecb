package repository

// localeInterner shares one string per distinct users.locale within an
// audience page: a page holds thousands of targets but only a handful of
// languages, so this saves an allocation per target on the hot path.
type localeInterner struct {
	seen map[string]string
}

// maxInterned bounds the map should a table hold unusual locales.
const maxInterned = 64

func (l *localeInterner) intern(raw []byte) string {
	if s, ok := l.seen[string(raw)]; ok { // no allocation for the lookup
		return s
	}
	s := string(raw)
	if l.seen == nil {
		l.seen = make(map[string]string, 8)
	}
	if len(l.seen) < maxInterned {
		l.seen[s] = s
	}
	return s
}
