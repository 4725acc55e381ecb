package message

import (
	"pushfan/fanout"
	"pushfan/model"
)

// Engine is the engine's message for a stored message: the one
// place a model.Message becomes what the FCM client encodes, so that a
// broadcast's chunks and a test send carry the same fields.
func Engine(m model.Message, collapseKey string, dryRun bool) *fanout.Message {
	return &fanout.Message{
		Title: m.Title, Body: m.Body, Image: m.Image, Data: m.Data,
		CollapseKey: collapseKey,
		Platform:    messagePlatform(m),
		DryRun:      dryRun,
	}
}
