package quota

import (
	"math"
	"sort"
)

// split divides limit between members wanting demand[i] messages a second
// each (+Inf: as much as they get) by max-min fairness: a member that
// wants less than an equal split gets what it wants, and what it leaves
// is split between the others the same way. A paced broadcast's instance
// therefore takes its pace, not a third of the project.
func split(limit float64, demand []float64) []float64 {
	out := make([]float64, len(demand))
	order := make([]int, len(demand))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return demand[order[a]] < demand[order[b]] })
	left, n := limit, len(demand)
	for k, i := range order {
		fair := left / float64(n-k)
		if d := demand[i]; d < fair {
			out[i] = d
			left -= d
			continue
		}
		for _, j := range order[k:] {
			out[j] = fair
		}
		break
	}
	return out
}

// paced is the head room a paced member gets over its demand: its pace is
// recomputed every second, and a share exactly at it would make the pace
// wait on the throttle's burst correction.
const paced = 1.05

// demandOf is a member's demand as the split sees it.
func demandOf(d float64) float64 {
	if math.IsInf(d, 1) {
		return d
	}
	return d * paced
}
