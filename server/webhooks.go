package server

import "pushfan/webhook"

// WithWebhooks serves the webhook endpoints' health and deliveries.
func WithWebhooks(d *webhook.Deliverer) Option { return func(s *Server) { s.extra.webhooks = d } }
