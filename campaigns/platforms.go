package campaigns

import (
	"context"
	"fmt"

	"pushfan/internal/platform/sqldb"
	"pushfan/lease/sends"
	"pushfan/model"
)

// Notes for the breakdown by platform.
const (
	notePlatform       = "sends are counted per device platform (the token's platform as the send read it: android, ios, web, other for any other or none) but not targeted, so a platform has a success rate (succeeded ÷ sent), not a reach"
	notePlatformEvents = "; opens and clicks are counted per platform from the platform each send's event token carries, so a platform row leaves opened, clicked, ctr and clicks_per_sent null when one of its broadcasts has opens or clicks whose platform is not known: sent before pushfan put the platform in the event token, or opened before pushfan counted events per platform"
	noteUnsplit        = "; the key \"\" holds, whole, the broadcasts whose counts per platform do not add up to their succeeded and failed (with no targeted, opens or clicks, as a platform row): sent before pushfan counted platforms (or resent by such a resend), or holding sends a cancel moved from an instance a takeover fenced off (those carry no platform)"
)

// platformEvents are a broadcast's opens and clicks (with its resends')
// per platform code (model.PlatformCode; 0: not known).
type platformEvents [5][2]int64

// byPlatform adds bs to ss by platform: a broadcast whose platforms were
// counted exactly by the counts per platform, the others whole under "".
// A platform's opens and clicks are the events per platform
// (engagement_platform_counts) of broadcasts whose events all carried a
// platform: those of known platforms add up to its opened and clicked.
// One broadcast that does not leaves its platforms' events null.
func (r *Reader) byPlatform(ctx context.Context, bs []sent, ss sliceSet) error {
	var ids []uint64
	for i := range bs {
		if bs[i].platOK && (bs[i].opened > 0 || bs[i].clicked > 0) {
			ids = append(append(ids, bs[i].id), bs[i].resends...)
		}
	}
	events, err := r.readPlatformEvents(ctx, ids)
	if err != nil {
		return err
	}
	for i := range bs {
		b := &bs[i]
		if !b.platOK {
			s := ss.at("")
			s.whole(b)
			s.noTargeted, s.noEvents = true, true
			continue
		}
		var ev platformEvents
		for _, id := range append([]uint64{b.id}, b.resends...) {
			if events[id] == nil {
				continue
			}
			for c, oc := range events[id] {
				ev[c][0] += oc[0]
				ev[c][1] += oc[1]
			}
		}
		var opened, clicked int64
		for _, oc := range ev[1:] {
			opened, clicked = opened+oc[0], clicked+oc[1]
		}
		exact := opened == b.opened && clicked == b.clicked
		for p, n := range b.plat {
			oc := ev[p+1]
			if n == (sends.Sent{}) && oc == [2]int64{} {
				continue
			}
			s := ss.at(model.Platforms[p])
			s.count(b.id)
			s.noTargeted = true
			s.noEvents = s.noEvents || !exact
			s.Sent += n.Succeeded + n.Failed
			s.succeeded += n.Succeeded
			s.failed += n.Failed
			s.opened += oc[0]
			s.clicked += oc[1]
		}
	}
	return nil
}

// readPlatformEvents reads the opens and clicks per platform of ids, in
// batches of IDBatch: a range of engagement_platform_counts' key per
// broadcast, a few rows each.
func (r *Reader) readPlatformEvents(ctx context.Context, ids []uint64) (map[uint64]*platformEvents, error) {
	out := make(map[uint64]*platformEvents, len(ids))
	for start := 0; start < len(ids); start += IDBatch {
		batch := ids[start:min(start+IDBatch, len(ids))]
		args := []any{uint8(model.EventOpened), uint8(model.EventClicked)}
		for _, id := range batch {
			args = append(args, id)
		}
		rows, err := r.DB.QueryContext(ctx, `SELECT broadcast_id, platform, SUM(IF(type = ?, n, 0)), SUM(IF(type = ?, n, 0))
			FROM engagement_platform_counts WHERE broadcast_id IN (`+sqldb.InList(len(batch))+`) GROUP BY broadcast_id, platform`, args...)
		if err != nil {
			return nil, fmt.Errorf("campaigns: read events per platform: %w", err)
		}
		for rows.Next() {
			var (
				id              uint64
				code            uint8
				opened, clicked int64
			)
			if err := rows.Scan(&id, &code, &opened, &clicked); err != nil {
				rows.Close()
				return nil, fmt.Errorf("campaigns: read events per platform: %w", err)
			}
			if out[id] == nil {
				out[id] = &platformEvents{}
			}
			if int(code) >= len(out[id]) {
				code = 0 // a code this release does not know: not known
			}
			out[id][code][0] += opened
			out[id][code][1] += clicked
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("campaigns: read events per platform: %w", err)
		}
	}
	return out, nil
}

// platformNotStored names the fields the platform rows leave null, and
// the note that says why: events is whether a platform's row (not "")
// leaves its opens and clicks null, unsplit whether there is a row "".
func platformNotStored(events, unsplit bool) ([]string, string) {
	out, note := []string{"targeted", "reach"}, notePlatform
	if events || unsplit {
		out = []string{"targeted", "opened", "clicked", "reach", "ctr", "clicks_per_sent"}
	}
	if events {
		note += notePlatformEvents
	}
	if unsplit {
		note += noteUnsplit
	}
	return out, note
}
