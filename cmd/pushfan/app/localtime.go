package app

import (
	"fmt"
	"time"

	"pushfan/config"
	"pushfan/model"
)

// localTime turns the validated local-time settings into the request
// rules' default zone and default quiet hours (nil: none).
func localTime(e config.Engine) (*time.Location, *model.QuietHours, error) {
	zone, err := time.LoadLocation(e.DefaultTimezone)
	if err != nil {
		return nil, nil, fmt.Errorf("PUSHFAN_DEFAULT_TIMEZONE: %w", err)
	}
	if e.QuietHours == "" {
		return zone, nil, nil
	}
	start, end, err := config.ParseQuietHours(e.QuietHours)
	if err != nil {
		return nil, nil, fmt.Errorf("PUSHFAN_QUIET_HOURS: %w", err)
	}
	return zone, &model.QuietHours{Start: start, End: end}, nil
}
