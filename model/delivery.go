package model

import "time"

// DeliveryClass is how FCM and the platforms are asked to treat the
// messages of one class on the way to the device (docs/fcm.md): the
// priority on Android ("normal" or "high") and on APNs ("5" or "10"),
// and how long an offline device's copy is kept. A request's own
// android, apns or webpush override always wins over these.
type DeliveryClass struct {
	AndroidPriority string        `yaml:"android_priority"`
	APNSPriority    string        `yaml:"apns_priority"`
	TTL             time.Duration `yaml:"ttl"`
}

// DeliveryDefaults are the delivery defaults of each class: bulk (and
// paced) broadcasts at normal priority, as Firebase and Apple ask of
// traffic that is not urgent; transactional ones high, and kept for
// less time, since a late "your code is 1234" is worse than none.
type DeliveryDefaults struct {
	Bulk          DeliveryClass `yaml:"bulk"`
	Transactional DeliveryClass `yaml:"transactional"`
}

// Of is the defaults of class (ClassTransactional or anything else:
// bulk).
func (d DeliveryDefaults) Of(class string) DeliveryClass {
	if class == ClassTransactional {
		return d.Transactional
	}
	return d.Bulk
}

// Over is d with the fields that o sets replacing d's (an app's own
// defaults over the deployment's).
func (d DeliveryDefaults) Over(o *DeliveryDefaults) DeliveryDefaults {
	if o == nil {
		return d
	}
	d.Bulk, d.Transactional = d.Bulk.over(o.Bulk), d.Transactional.over(o.Transactional)
	return d
}

func (c DeliveryClass) over(o DeliveryClass) DeliveryClass {
	if o.AndroidPriority != "" {
		c.AndroidPriority = o.AndroidPriority
	}
	if o.APNSPriority != "" {
		c.APNSPriority = o.APNSPriority
	}
	if o.TTL != 0 {
		c.TTL = o.TTL
	}
	return c
}
