// Package cron holds pushfan's recurring broadcast jobs: their definitions as read from the YAML
// file named by PUSHFAN_CONFIG, their validation, and the computation of their fire times,
// including what happens across daylight-saving changes and after an outage.
//
// The schedules are pure logic: no database, no goroutines, no clock; a Compiled job is
// read-only and safe for concurrent use. The Scheduler runs them: it fires each job on time
// through a Submitter (the broadcast service, which keeps one broadcast per job and fire time
// in MySQL), retries a fire that failed (the database unreachable at that second) for
// max(catchup, DefaultRetryFor) before recording it skipped, and catches up on a fire missed
// while every instance was down.
//
// # Fire times and daylight saving
//
// A schedule is a robfig/cron/v3 expression (five fields, or six with a leading seconds field,
// or a descriptor such as @daily) evaluated in the job's IANA time zone. Fire times are
// whole-second instants, returned in UTC. Where local time jumps, two rules apply, chosen by the
// schedule's hour field:
//
//   - Wall-clock schedules (the hour field does not cover all 24 hours, e.g. "30 2 * * *",
//     "0 9 * * MON", "0 */6 * * *"): each scheduled local time fires exactly once, at the first
//     instant the local clock reads that time or later. So a time repeated by a fall-back fires
//     at its first occurrence only (01:30 EDT, not again at 01:30 EST), and a time skipped by a
//     spring-forward fires at the end of the gap (02:30 on 2026-03-08 in New York fires at
//     03:00 EDT) rather than being lost: a daily reminder still goes out that day. Several
//     skipped times that land on the same instant fire once.
//   - Elapsed-time schedules (the hour field covers every hour, e.g. "0 * * * *",
//     "*/15 * * * *", "*/1 * * * * *"): the job fires at every real instant whose local clock
//     reading matches, so an hourly job fires every real hour: 25 times on a fall-back day,
//     23 times on a spring-forward day, never twice within an hour and never with a two-hour
//     hole.
//
// This follows classic cron's DST handling (Vixie cron, cronie: fixed-time jobs run once, frequent
// jobs run on real time), with the two kinds told apart by the hour field. robfig's
// own Schedule.Next, evaluated in a zone, does otherwise: it drops a wall-clock time that falls
// in a spring-forward gap and fires a repeated time twice on a fall-back (see the tests). This
// package therefore uses robfig only to parse and to match calendar fields in UTC, where no DST
// exists, and maps local times to instants itself using the zone's transitions.
//
// @every descriptors are anchored to the Unix epoch (fires at whole multiples of the interval
// since 1970-01-01T00:00:00Z), not to the moment a process started, so that every instance
// computes the same fire times and the unique key on job and fire time holds across instances.
package cron
