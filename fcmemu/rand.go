package fcmemu

// Random choices are a hash of (seed, token, attempt, purpose) rather than draws from a shared
// source: nothing to lock on the hot path, and a seed reproduces every token's n-th outcome
// however requests interleave.

// Salts keep the draws for different purposes independent.
const (
	saltError  uint64 = 0x6a09e667f3bcc908
	saltUnreg  uint64 = 0xbb67ae8584caa73b
	saltJitter uint64 = 0x3c6ef372fe94f82b
)

// splitmix64 is the SplitMix64 finaliser: a cheap, well-mixed 64-bit permutation.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// fnv64a hashes a token without allocating.
func fnv64a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// draw returns a uniform float64 in [0,1) determined by its arguments.
func draw(seed int64, token string, attempt int64, salt uint64) float64 {
	x := splitmix64(uint64(seed) ^ salt)
	x = splitmix64(x ^ fnv64a(token))
	x = splitmix64(x ^ uint64(attempt))
	return float64(x>>11) / (1 << 53)
}
