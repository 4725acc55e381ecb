package message

import (
	"encoding/json"
	"fmt"
	"strings"

	"pushfan/fanout"
	"pushfan/model"
)

// Track returns a copy of m that carries a send's event token, for the
// engine to fill per send (fanout.TagPlaceholder): in data[TagDataKey],
// and, when clickURL is set (PUSHFAN_PUBLIC_URL/v1/c/), in place of the
// links of stored (the message m was made from), which then lead through
// the click redirect: the web push link (webpush.fcm_options.link, only
// with an https click URL, as FCM requires) as clickURL+token, the data
// value at stored.LinkKey as clickURL+token+DataLinkSuffix. A link that is
// a template is left as it is: the redirect could only lead to the
// template.
func Track(m *fanout.Message, stored model.Message, clickURL string) (*fanout.Message, error) {
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
	if k := stored.LinkKey; k != "" && !templated(stored.Data[k]) {
		if _, ok := c.Data[k]; ok {
			c.Data[k] = clickURL + fanout.TagPlaceholder + DataLinkSuffix
		}
	}
	if l := webLink(stored); l == "" || templated(l) || !strings.HasPrefix(clickURL, "https://") || len(m.Platform.Webpush) == 0 {
		return &c, nil
	}
	var w map[string]any
	if err := json.Unmarshal(m.Platform.Webpush, &w); err != nil {
		return nil, fmt.Errorf("tracking the web push link: %w", err)
	}
	if o, ok := w["fcm_options"].(map[string]any); ok {
		if _, ok := o["link"].(string); ok {
			o["link"] = clickURL + fanout.TagPlaceholder
			raw, err := json.Marshal(w)
			if err != nil {
				return nil, fmt.Errorf("tracking the web push link: %w", err)
			}
			c.Platform.Webpush = raw
		}
	}
	return &c, nil
}

// DataLinkSuffix ends the click URL sent in place of a data link: the
// redirect then leads to the data link, not to the web push one.
const DataLinkSuffix = "/d"

func templated(s string) bool { return strings.Contains(s, "{{") }

// webLink is m's web push link ("" when none).
func webLink(m model.Message) string {
	if len(m.Webpush) == 0 {
		return ""
	}
	var w struct {
		FCMOptions struct {
			Link string `json:"link"`
		} `json:"fcm_options"`
	}
	if json.Unmarshal(m.Webpush, &w) != nil {
		return ""
	}
	return w.FCMOptions.Link
}

// Link is where a click on a message of m leads, as stored with the
// broadcast: for a click on its data link, the data value at m.LinkKey,
// else its web push link; of A/B variant variant (from 1; 0: m has none).
// "" when there is none.
func Link(m model.Message, variant int, data bool) string {
	if variant > 0 && variant <= len(m.Variants) {
		m = m.Variants[variant-1].Message
	}
	if data {
		if m.LinkKey == "" {
			return ""
		}
		return m.Data[m.LinkKey]
	}
	return webLink(m)
}
