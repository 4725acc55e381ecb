package config

import (
	"time"

	"pushfan/model"
)

// maxDeliveryTTL is FCM's longest time to live: 28 days.
const maxDeliveryTTL = 28 * 24 * time.Hour

// defaultDelivery is how each class is sent unless configured: bulk (and
// paced) at normal priority on Android and 5 on APNs, as Firebase and
// Apple ask of traffic that is not urgent (Android demotes an app whose
// high-priority messages show nothing), kept FCM's 4 weeks; transactional
// at high and 10, kept a day.
func defaultDelivery() model.DeliveryDefaults {
	return model.DeliveryDefaults{
		Bulk:          model.DeliveryClass{AndroidPriority: "normal", APNSPriority: "5", TTL: maxDeliveryTTL},
		Transactional: model.DeliveryClass{AndroidPriority: "high", APNSPriority: "10", TTL: 24 * time.Hour},
	}
}

// validateDeliveryClass checks one class's defaults under key (a YAML
// path or a variable's prefix). partial: an app's, where an empty field
// keeps the deployment's.
func validateDeliveryClass(key string, c model.DeliveryClass, partial bool, bad func(name, format string, args ...any)) {
	if msg := androidPriorityProblem(c.AndroidPriority, partial); msg != "" {
		bad(key+".android_priority", "%s", msg)
	}
	if msg := apnsPriorityProblem(c.APNSPriority, partial); msg != "" {
		bad(key+".apns_priority", "%s", msg)
	}
	if msg := ttlProblem(c.TTL, partial); msg != "" {
		bad(key+".ttl", "%s", msg)
	}
}

func androidPriorityProblem(p string, partial bool) string {
	if p == "normal" || p == "high" || partial && p == "" {
		return ""
	}
	return "must be normal or high, got " + quoteOrEmpty(p)
}

func apnsPriorityProblem(p string, partial bool) string {
	if p == "1" || p == "5" || p == "10" || partial && p == "" {
		return ""
	}
	return "must be 10 (at once), 5 (as the device's power allows) or 1 (when it wakes), got " + quoteOrEmpty(p)
}

func ttlProblem(d time.Duration, partial bool) string {
	if d < 0 || d > maxDeliveryTTL || d == 0 && !partial {
		return "must be above 0 and at most 672h (FCM's 28 days), got " + d.String()
	}
	if d%time.Second != 0 {
		return "must be whole seconds (FCM counts a lifetime in seconds), got " + d.String()
	}
	return ""
}

func quoteOrEmpty(s string) string {
	if s == "" {
		return "nothing"
	}
	return `"` + s + `"`
}
