package model

// The device platforms a send is counted under (the campaigns' breakdown
// by platform): the token's platform column as the run's audience page
// read it, compared without case. Anything else, and a token without a
// platform (NULL, or a mapped schema with no platform column), is
// "other": an operator's table may spell platforms its own way.
const (
	PlatformAndroid = "android"
	PlatformIOS     = "ios"
	PlatformWeb     = "web"
	PlatformOther   = "other"
)

// Platforms are the platforms sends are counted under, in the order the
// counters are stored. An array, so that its length is a constant the
// counters' arrays take (sends.Split): a platform added here grows them.
// Read only.
var Platforms = [...]string{PlatformAndroid, PlatformIOS, PlatformWeb, PlatformOther}

// PlatformCode is platform's code where a byte stores it (the event
// token, engagement_platform_counts): 1 + its index in Platforms, 0 for
// any other string, "" included (a platform not known).
func PlatformCode(platform string) uint8 {
	for i, p := range Platforms {
		if p == platform {
			return uint8(i + 1)
		}
	}
	return 0
}

// PlatformOf is the platform a token's platform column counts under. It
// allocates nothing: the answer is one of the constants.
func PlatformOf(raw []byte) string {
	switch {
	case foldEqual(raw, PlatformAndroid):
		return PlatformAndroid
	case foldEqual(raw, PlatformIOS):
		return PlatformIOS
	case foldEqual(raw, PlatformWeb):
		return PlatformWeb
	}
	return PlatformOther
}

// foldEqual reports whether b is s (lower-case ASCII) in any case.
func foldEqual(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
