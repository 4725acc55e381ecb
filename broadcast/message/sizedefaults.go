package message

import "math"

// The payload limit counts what FCM receives, pushfan's delivery defaults
// included: a message that fits without them must not be refused by FCM
// once package fcm adds them, so its size is measured with the longest
// values they can take.

// The longest values package fcm may add (fcm/platform.go,
// setDeliveryDefaults): the display tag of the largest id, "normal"
// priority, FCM's longest lifetime, an apns-expiration of ten digits.
var longestDefaults = struct {
	tag, androidPriority, ttl, apnsPriority, expiration, webTTL, urgency string
}{Tag(math.MaxUint64), "normal", "2419200s", "10", "9999999999", "2419200", "normal"}

// withLongestDefaults is the object named name with the longest delivery
// defaults added where it has none of its own.
func withLongestDefaults(name string, tree map[string]any) map[string]any {
	d := longestDefaults
	switch name {
	case "android":
		return withDefaults(tree, map[string]any{"priority": d.androidPriority, "ttl": d.ttl,
			"notification": map[string]any{"tag": d.tag}})
	case "apns":
		return withDefaults(tree, map[string]any{"headers": map[string]any{
			"apns-collapse-id": d.tag, "apns-priority": d.apnsPriority, "apns-expiration": d.expiration}})
	case "webpush":
		return withDefaults(tree, map[string]any{"headers": map[string]any{"TTL": d.webTTL, "Urgency": d.urgency},
			"notification": map[string]any{"tag": d.tag}})
	}
	return tree
}

// withDefaults is tree with defaults added, one level of objects deep,
// where tree has no value of the same key: a copy, tree is not changed.
func withDefaults(tree, defaults map[string]any) map[string]any {
	out := make(map[string]any, len(tree)+len(defaults))
	for k, v := range tree {
		out[k] = v
	}
	for k, dv := range defaults {
		sub, isObject := dv.(map[string]any)
		have, ok := out[k]
		switch {
		case !ok:
			out[k] = dv
		case isObject:
			if m, isMap := have.(map[string]any); isMap {
				merged := make(map[string]any, len(m)+len(sub))
				for sk, sv := range sub {
					merged[sk] = sv
				}
				for sk, sv := range m {
					merged[sk] = sv
				}
				out[k] = merged
			}
		}
	}
	return out
}
