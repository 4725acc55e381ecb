package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// It is 100 on every Linux the Go runtime supports.
const clockTicks = 100

// procCPU returns the user+system CPU time a process has used so far, from
// /proc/<pid>/stat (fields 14 and 15, after the parenthesised command).
func procCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime/stime", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// procStatusKB reads one "Key:   123 kB" line of /proc/<pid>/status.
func procStatusKB(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			fs := strings.Fields(rest)
			if len(fs) == 0 {
				break
			}
			return strconv.ParseInt(fs[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, key)
}

// selfCPU is this process's user+system CPU time (getrusage RUSAGE_SELF).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// exactPercentiles returns p50, p95, p99 of samples in milliseconds
// (nearest rank); zero samples (failed sends) are left out.
func exactPercentiles(samples []time.Duration) (p50, p95, p99 float64) {
	s := make([]time.Duration, 0, len(samples))
	for _, d := range samples {
		if d > 0 {
			s = append(s, d)
		}
	}
	if len(s) == 0 {
		return 0, 0, 0
	}
	slices.Sort(s)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		i = min(max(i, 0), len(s)-1)
		return float64(s[i]) / float64(time.Millisecond)
	}
	return q(0.50), q(0.95), q(0.99)
}

// histogram is a cumulative Prometheus histogram: upper bounds (seconds,
// +Inf last) and the count of observations at or below each.
type histogram struct {
	le  []float64
	cum []float64
}

// parseHistogram reads the _bucket lines of metric from a Prometheus text
// exposition, summing over every other label. ok is false when the metric
// is absent.
func parseHistogram(r io.Reader, metric string) (h histogram, ok bool, err error) {
	sums := map[float64]float64{}
	prefix := metric + "_bucket"
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		rest := line[len(prefix):]
		labels := ""
		if strings.HasPrefix(rest, "{") {
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				continue
			}
			labels, rest = rest[1:end], rest[end+1:]
		}
		leStr, found := labelValue(labels, "le")
		if !found {
			continue
		}
		var le float64
		if leStr == "+Inf" {
			le = math.Inf(1)
		} else if le, err = strconv.ParseFloat(leStr, 64); err != nil {
			return h, false, fmt.Errorf("%s: bad le %q", metric, leStr)
		}
		fs := strings.Fields(rest)
		if len(fs) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fs[0], 64)
		if err != nil {
			return h, false, fmt.Errorf("%s: bad value %q", metric, fs[0])
		}
		sums[le] += v
		ok = true
	}
	if err := sc.Err(); err != nil {
		return h, false, err
	}
	for le := range sums {
		h.le = append(h.le, le)
	}
	slices.Sort(h.le)
	for _, le := range h.le {
		h.cum = append(h.cum, sums[le])
	}
	return h, ok, nil
}

// labelValue finds name="value" in a Prometheus label list.
func labelValue(labels, name string) (string, bool) {
	for len(labels) > 0 {
		eq := strings.IndexByte(labels, '=')
		if eq < 0 || eq+1 >= len(labels) || labels[eq+1] != '"' {
			return "", false
		}
		key := strings.TrimSpace(labels[:eq])
		rest := labels[eq+2:]
		var val strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
			}
			val.WriteByte(rest[i])
		}
		if key == name {
			return val.String(), true
		}
		if i+1 >= len(rest) {
			return "", false
		}
		labels = strings.TrimPrefix(rest[i+1:], ",")
	}
	return "", false
}

// sub returns h - prev (bucket by bucket), for a delta over one run.
func (h histogram) sub(prev histogram) histogram {
	if len(prev.le) == 0 {
		return h
	}
	old := map[float64]float64{}
	for i, le := range prev.le {
		old[le] = prev.cum[i]
	}
	d := histogram{le: slices.Clone(h.le), cum: make([]float64, len(h.cum))}
	for i, le := range h.le {
		d.cum[i] = h.cum[i] - old[le]
	}
	return d
}

func (h histogram) count() float64 {
	if len(h.cum) == 0 {
		return 0
	}
	return h.cum[len(h.cum)-1]
}

// quantile interpolates linearly within the bucket holding rank q*count,
// like PromQL's histogram_quantile: the lower bound of the first bucket is
// 0, and a rank in the +Inf bucket answers the highest finite bound.
func (h histogram) quantile(q float64) float64 {
	total := h.count()
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	prevLE, prevCum := 0.0, 0.0
	for i, le := range h.le {
		if h.cum[i] >= rank {
			if math.IsInf(le, 1) {
				return prevLE
			}
			if h.cum[i] == prevCum {
				return le
			}
			return prevLE + (le-prevLE)*(rank-prevCum)/(h.cum[i]-prevCum)
		}
		prevLE, prevCum = le, h.cum[i]
	}
	return prevLE
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// machine describes the box a result came from.
type machine struct {
	NumCPU     int    `json:"nproc"`
	CPUModel   string `json:"cpu_model"`
	MemTotalMB int64  `json:"mem_total_mb"`
	GoVersion  string `json:"go_version"`
	Kernel     string `json:"kernel"`
	LoadAvg    string `json:"load_avg_at_start"`
	LoadAvgEnd string `json:"load_avg_at_end"`
	Hostname   string `json:"hostname"`
	GOMAXPROCS int    `json:"gomaxprocs"`
}

func describeMachine() machine {
	m := machine{NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(raw), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if raw, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(raw), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				if fs := strings.Fields(rest); len(fs) > 0 {
					kb, _ := strconv.ParseInt(fs[0], 10, 64)
					m.MemTotalMB = kb / 1024
				}
			}
		}
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(raw))
	}
	m.LoadAvg = loadAvg()
	m.Hostname, _ = os.Hostname()
	return m
}

func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	fs := strings.Fields(string(raw))
	if len(fs) < 3 {
		return ""
	}
	return strings.Join(fs[:3], " ")
}
