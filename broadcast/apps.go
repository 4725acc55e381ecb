package broadcast

import "pushfan/broadcast/instance"

// App is one app's sending parts, and Apps an instance's apps, as the
// service takes them (package instance holds them for the planner and the
// runs).
type (
	App  = instance.App
	Apps = instance.Apps
)

// NewApps holds the apps, in configuration order.
func NewApps(list ...*App) *Apps { return instance.NewApps(list...) }
