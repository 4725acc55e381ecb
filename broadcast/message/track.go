package message

import (
	"encoding/json"
	"fmt"

	"pushfan/fanout"
	"pushfan/model"
)

// Track returns a copy of m that carries a send's event token, for the
// engine to fill per send (fanout.TagPlaceholder): in data[TagDataKey],
// and, when clickURL is set (PUSHFAN_PUBLIC_URL/v1/c/), in place of the
// message's links, which then lead through the click redirect: the web
// push link (webpush.fcm_options.link) and the data value at linkKey.
func Track(m *fanout.Message, clickURL, linkKey string) (*fanout.Message, error) {
	c := *m
	c.Tagged = true
	c.Data = make(map[string]string, len(m.Data)+1)
	for k, v := range m.Data {
		c.Data[k] = v
	}
	c.Data[TagDataKey] = fanout.TagPlaceholder
	if clickURL == "" {
		return &c, nil
	}
	tracked := clickURL + fanout.TagPlaceholder
	if _, ok := c.Data[linkKey]; ok && linkKey != "" {
		c.Data[linkKey] = tracked
	}
	if len(m.Platform.Webpush) > 0 {
		var w map[string]any
		if err := json.Unmarshal(m.Platform.Webpush, &w); err != nil {
			return nil, fmt.Errorf("tracking the web push link: %w", err)
		}
		if o, ok := w["fcm_options"].(map[string]any); ok {
			if _, ok := o["link"].(string); ok {
				o["link"] = tracked
				raw, err := json.Marshal(w)
				if err != nil {
					return nil, fmt.Errorf("tracking the web push link: %w", err)
				}
				c.Platform.Webpush = raw
			}
		}
	}
	return &c, nil
}

// Link is the link a click on a message of m leads to, as stored with the
// broadcast: the web push link, else the data value at m.LinkKey; "" when
// it has none.
func Link(m model.Message) string {
	if len(m.Webpush) > 0 {
		var w struct {
			FCMOptions struct {
				Link string `json:"link"`
			} `json:"fcm_options"`
		}
		if json.Unmarshal(m.Webpush, &w) == nil && w.FCMOptions.Link != "" {
			return w.FCMOptions.Link
		}
	}
	if m.LinkKey != "" {
		return m.Data[m.LinkKey]
	}
	return ""
}
