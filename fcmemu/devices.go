package fcmemu

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// FCM's store for an offline Android device (firebase.google.com/docs/
// cloud-messaging/customize-messages/setting-message-lifespan and
// .../concept-options#collapsible_and_non-collapsible_messages):
//   - a non-collapsible message is kept, up to 100 per device; the 101st
//     makes FCM discard them all and tell the app (onDeletedMessages);
//   - a collapsible message replaces the stored one of its collapse key,
//     and at most four collapse keys are kept, "with no guarantees about
//     which ones": here the key stored longest ago goes;
//   - a message whose time to live passes while the device is away is
//     dropped; one with a ttl of 0 is never stored.
const (
	maxStoredPerDevice       = 100
	maxCollapseKeysPerDevice = 4
	defaultTTL               = 28 * 24 * time.Hour
)

// devices are the tokens a test watches as phones: each one online or
// offline, with what FCM stored for it while it was offline. Only watched
// tokens cost anything; every other token is a phone always online that
// nobody looks at.
type devices struct {
	any atomic.Bool // a token is watched: the hot path checks this alone
	mu  sync.Mutex
	m   map[string]*device
}

// device is one watched token.
type device struct {
	offline bool
	stored  []Delivered // in the order FCM received them
	// deleted is set when FCM discarded the store (over 100 kept).
	deleted bool
	// received are the messages the device got, online or on return.
	received []Delivered
}

// Delivered is a message as a device gets it: what FCM received, and
// the parts of it that decide how it is stored and shown.
type Delivered struct {
	// CollapseKey is android.collapse_key ("": not collapsible).
	CollapseKey string `json:"collapse_key,omitempty"`
	// Tag is android.notification.tag: a notification with the tag of one
	// already shown replaces it on the display.
	Tag   string `json:"tag,omitempty"`
	Title string `json:"title,omitempty"`
	// Priority is android.priority ("": FCM's default, high).
	Priority string `json:"priority,omitempty"`
	// Message is the request's "message" object.
	Message json.RawMessage `json:"message"`
	at      int64           // when FCM accepted it (emulator instants)
	ttl     time.Duration
}

// Offline takes token's phone off the network: FCM stores what it
// accepts for it from now on, by FCM's rules, until Online.
func (e *Emulator) Offline(token string) {
	d := &e.devs
	d.mu.Lock()
	defer d.mu.Unlock()
	e.deviceLocked(token).offline = true
}

// Online brings token's phone back: it gets what FCM kept for it, in the
// order FCM received them, and whether FCM discarded the store meanwhile
// (the app's onDeletedMessages). Later messages reach it at once.
func (e *Emulator) Online(token string) (got []Delivered, deleted bool) {
	d := &e.devs
	d.mu.Lock()
	defer d.mu.Unlock()
	dev := e.deviceLocked(token)
	now := e.now()
	for _, m := range dev.stored {
		if now <= m.at+int64(m.ttl) {
			got = append(got, m)
		}
	}
	deleted = dev.deleted
	dev.received = append(dev.received, got...)
	dev.offline, dev.stored, dev.deleted = false, nil, false
	return got, deleted
}

// Received is every message token's watched phone got so far: online at
// once, or on its return.
func (e *Emulator) Received(token string) []Delivered {
	d := &e.devs
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Delivered(nil), e.deviceLocked(token).received...)
}

// Shown is what a phone's notification tray holds after got, in order:
// a notification with the tag of one shown replaces it (Android's and the
// web's notification tag, APNs' apns-collapse-id).
func Shown(got []Delivered) []Delivered {
	var out []Delivered
	at := map[string]int{}
	for _, m := range got {
		if i, ok := at[m.Tag]; ok && m.Tag != "" {
			out[i] = m
			continue
		}
		at[m.Tag] = len(out)
		out = append(out, m)
	}
	return out
}

func (e *Emulator) deviceLocked(token string) *device {
	d := &e.devs
	if d.m == nil {
		d.m = map[string]*device{}
	}
	dev, ok := d.m[token]
	if !ok {
		dev = &device{}
		d.m[token] = dev
		d.any.Store(true)
	}
	return dev
}

// watched reports whether token is a watched phone (cheap when none is).
func (d *devices) watched(token string) bool {
	if !d.any.Load() {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.m[token]
	return ok
}

// accept hands a message FCM accepted for a watched token to its phone:
// at once when online, else into FCM's store by FCM's rules.
func (e *Emulator) accept(token string, raw json.RawMessage) {
	m := delivered(raw)
	m.at = e.now()
	d := &e.devs
	d.mu.Lock()
	defer d.mu.Unlock()
	dev, ok := d.m[token]
	if !ok {
		return
	}
	if !dev.offline {
		dev.received = append(dev.received, m)
		return
	}
	if m.ttl == 0 {
		return // deliver now or never: the device is away
	}
	if m.CollapseKey != "" {
		keys := 0
		oldest := -1
		for i, s := range dev.stored {
			if s.CollapseKey == m.CollapseKey {
				dev.stored = append(dev.stored[:i], dev.stored[i+1:]...)
				keys = -1 // replaced: the count of keys does not grow
				break
			}
		}
		if keys == 0 {
			seen := map[string]bool{}
			for i, s := range dev.stored {
				if s.CollapseKey != "" && !seen[s.CollapseKey] {
					seen[s.CollapseKey] = true
					if oldest < 0 {
						oldest = i
					}
				}
			}
			if len(seen) >= maxCollapseKeysPerDevice {
				dev.stored = append(dev.stored[:oldest], dev.stored[oldest+1:]...)
			}
		}
		dev.stored = append(dev.stored, m)
		return
	}
	n := 0
	for _, s := range dev.stored {
		if s.CollapseKey == "" {
			n++
		}
	}
	if n >= maxStoredPerDevice {
		kept := dev.stored[:0]
		for _, s := range dev.stored {
			if s.CollapseKey != "" {
				kept = append(kept, s)
			}
		}
		dev.stored, dev.deleted = kept, true
		return // FCM drops the store, this message with it, and tells the app
	}
	dev.stored = append(dev.stored, m)
}

// message is the "message" object of a send's body, copied (the body
// lives in a pooled buffer), or nil.
func message(body []byte) json.RawMessage {
	var env struct {
		Message json.RawMessage `json:"message"`
	}
	if json.Unmarshal(body, &env) != nil || env.Message == nil {
		return nil
	}
	return append(json.RawMessage(nil), env.Message...)
}

// reset forgets every watched phone.
func (d *devices) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.m = nil
	d.any.Store(false)
}

// delivered reads what decides a message's storage and display.
func delivered(raw json.RawMessage) Delivered {
	var m struct {
		Notification struct {
			Title string `json:"title"`
		} `json:"notification"`
		Android struct {
			CollapseKey  string `json:"collapse_key"`
			Priority     string `json:"priority"`
			TTL          string `json:"ttl"`
			Notification struct {
				Tag string `json:"tag"`
			} `json:"notification"`
		} `json:"android"`
	}
	_ = json.Unmarshal(raw, &m) // the request was valid: it decoded before
	out := Delivered{CollapseKey: m.Android.CollapseKey, Tag: m.Android.Notification.Tag, Title: m.Notification.Title,
		Priority: m.Android.Priority, Message: raw, ttl: defaultTTL}
	if s, ok := strings.CutSuffix(m.Android.TTL, "s"); ok {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			out.ttl = time.Duration(f * float64(time.Second))
		}
	}
	return out
}

// serveDevice is POST /emulator/devices/{token}/offline and …/online:
// the second answers {"delivered": [...], "deleted": bool}.
func (e *Emulator) serveDevice(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	switch r.PathValue("state") {
	case "offline":
		e.Offline(token)
		w.WriteHeader(http.StatusNoContent)
	case "online":
		got, deleted := e.Online(token)
		if got == nil {
			got = []Delivered{}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Delivered []Delivered `json:"delivered"`
			Deleted   bool        `json:"deleted"`
		}{got, deleted})
	default:
		serveNotFound(w, r)
	}
}
