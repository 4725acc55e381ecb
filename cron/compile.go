package cron

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	robfigcron "github.com/robfig/cron/v3"
)

// Compiled is a validated job with its parsed schedule and location.
type Compiled struct {
	Job
	Loc *time.Location // the job's zone; UTC when Timezone is empty

	sched robfigcron.Schedule // as parsed by robfig

	kind  scheduleKind
	civil *robfigcron.SpecSchedule // copy of sched evaluated in UTC: pure calendar matching, no DST
	every time.Duration            // kindEvery: the @every interval, whole seconds, >= 1s

	stepHook func() // tests: called on every schedule step Missed takes
}

type scheduleKind int

const (
	kindWallClock scheduleKind = iota // hour field restricted: each local time fires once
	kindElapsed                       // every hour matches: fires at every real matching instant
	kindEvery                         // @every: epoch-anchored fixed interval
)

// allHours is the bit set of hours 0-23 in a SpecSchedule's Hour field.
const allHours = 1<<24 - 1

// parser accepts five fields, six with a leading seconds field, and descriptors (@daily, @every 1h).
var parser = robfigcron.NewParser(robfigcron.SecondOptional | robfigcron.Minute | robfigcron.Hour |
	robfigcron.Dom | robfigcron.Month | robfigcron.Dow | robfigcron.Descriptor)

var namePattern = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// neverFiresProbe is where Compile looks for a first fire to reject schedules that can never
// fire ("0 0 30 2 *"); robfig gives up after five years, which covers every real date.
var neverFiresProbe = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Compile validates jobs and parses their schedules. It checks that names are unique and match
// [a-z0-9_-]{1,64}; that the schedule parses (five fields or six with seconds, or a
// descriptor), carries no TZ=/CRON_TZ= prefix (use timezone) and can fire at all; that the
// timezone loads with time.LoadLocation and is not "Local" (empty means UTC); that catchup is
// not negative; that the message has a title, body or data; and that an audience is given and
// is representable as JSON (its content is validated by the API layer). Every problem is
// reported, each naming its job, joined with errors.Join; on error no job is returned.
func Compile(jobs []Job) ([]*Compiled, error) {
	var errs []error
	out := make([]*Compiled, 0, len(jobs))
	seen := make(map[string]int, len(jobs))
	for i, j := range jobs {
		label := fmt.Sprintf("cron job %q (jobs[%d])", j.Name, i)
		if j.Name == "" {
			label = fmt.Sprintf("cron job jobs[%d]", i)
		}
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: %s", label, fmt.Sprintf(format, args...)))
		}

		switch {
		case j.Name == "":
			fail("name is required")
		case !namePattern.MatchString(j.Name):
			fail("name must be 1 to 64 characters of a-z, 0-9, _ and -")
		}
		if first, dup := seen[j.Name]; dup && j.Name != "" {
			fail("duplicate name: jobs[%d] has it too", first)
		} else {
			seen[j.Name] = i
		}

		c := &Compiled{Job: j}
		loc, err := loadZone(j.Timezone)
		if err != nil {
			fail("%v", err)
		}
		c.Loc = loc
		if err := c.parseSchedule(); err != nil {
			fail("%v", err)
		}
		if j.Catchup < 0 {
			fail("catchup must not be negative, got %s", j.Catchup)
		}
		if j.Message.Title == "" && j.Message.Body == "" && len(j.Message.Data) == 0 {
			fail("message needs at least one of title, body or data")
		}
		if len(j.Audience) == 0 {
			fail("audience is required, e.g. {all: true}, {user_ids: [...]} or {name: ..., params: {...}}")
		} else if _, err := json.Marshal(j.Audience); err != nil {
			fail("audience cannot be passed on as JSON (are all its keys strings?): %v", err)
		}
		out = append(out, c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// Enabled reports whether the job should fire: true unless enabled: false was given.
func (c *Compiled) Enabled() bool { return c.Job.Enabled == nil || *c.Job.Enabled }

func loadZone(name string) (*time.Location, error) {
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, errors.New(`timezone "Local" depends on the host: give an IANA zone such as "Asia/Seoul" or "UTC"`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("timezone %q: %w", name, err)
	}
	return loc, nil
}

func (c *Compiled) parseSchedule() error {
	spec := strings.TrimSpace(c.Schedule)
	if spec == "" {
		return errors.New("schedule is required")
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return fmt.Errorf("schedule %q: a TZ= prefix is not allowed here; set timezone instead", c.Schedule)
	}
	s, err := parser.Parse(spec)
	if err != nil {
		return fmt.Errorf("schedule %q: %w", c.Schedule, err)
	}
	c.sched = s
	switch s := s.(type) {
	case *robfigcron.SpecSchedule:
		civil := *s
		civil.Location = time.UTC
		c.civil = &civil
		c.kind = kindWallClock
		if civil.Hour&allHours == allHours {
			c.kind = kindElapsed
		}
		if civil.Next(neverFiresProbe).IsZero() {
			return fmt.Errorf("schedule %q never fires: no date matches it", c.Schedule)
		}
	case robfigcron.ConstantDelaySchedule:
		c.kind = kindEvery
		c.every = s.Delay // robfig rounds to whole seconds, at least 1s
	default:
		return fmt.Errorf("schedule %q: unsupported schedule type %T", c.Schedule, s)
	}
	return nil
}
