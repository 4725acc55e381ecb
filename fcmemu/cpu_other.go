//go:build !unix

package fcmemu

// processCPUSeconds is not implemented off Unix; Stats.CPUSeconds reads 0.
func processCPUSeconds() float64 { return 0 }
