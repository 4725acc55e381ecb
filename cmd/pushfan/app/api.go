package app

import (
	"log/slog"

	"pushfan/apikey"
	"pushfan/broadcast"
	"pushfan/broadcast/reads"
	"pushfan/broadcast/testsend"
	"pushfan/config"
	"pushfan/consent"
	"pushfan/cron"
	"pushfan/model"
	"pushfan/segment"
	"pushfan/server"
	"pushfan/server/sso"
)

// apiConfig is the HTTP API's own settings, taken once from cfg (which
// has passed Validate). Admin tokens that do not parse (Validate refuses
// them) leave the admin API refusing every request: never half the
// tokens.
func apiConfig(cfg config.Config, log *slog.Logger) server.Config {
	parsed, err := config.ParseAdminTokens(cfg.AdminTokens)
	if err != nil {
		log.Error("admin tokens unusable; the admin API refuses every request", "err", err)
		parsed = nil
	}
	var admin []server.Token
	for _, t := range parsed {
		admin = append(admin, server.Token{Name: t.Name, Role: model.Role(t.Role), Hash: t.Hash, Apps: t.Apps})
	}
	h := cfg.HTTP
	return server.Config{
		Addr:        cfg.HTTPAddr,
		MetricsAddr: cfg.MetricsAddr,
		Tokens:      server.Tokens{Admin: admin, Internal: cfg.InternalToken, Metrics: cfg.MetricsToken},
		Timeouts: server.Timeouts{Read: h.ReadTimeout, ReadHeader: h.ReadHeaderTimeout, Write: h.WriteTimeout, Idle: h.IdleTimeout,
			Shutdown: h.ShutdownTimeout, Wait: h.WaitTimeout, DB: cfg.DB.Timeout},
		Limits: server.Limits{Body: h.BodyLimit, SubmitsPerMinute: h.SubmitPerMinute, TestSendsPerMinute: h.TestSendsPerMinute,
			PreviewsPerMinute: h.PreviewsPerMinute, SignInFailuresPerMinute: h.SignInFailuresPerMinute, EventsPerAddress: cfg.Events.PerAddress},
		SessionTTL: h.SessionTTL,
		// Validate refuses TokenSignIn false without an OIDC provider.
		DisableTokenSignIn: !h.TokenSignIn,
		TrustedProxies:     h.TrustedProxies,
		EventOrigins:       cfg.Events.Origins,
	}
}

// apiDomain is what the API serves: svc's operations, the consent
// book's, the segments' catalog's and the API keys', the named audiences of the
// reloader's catalog (read at each request) and its reload, and the apps,
// jobs and categories of cfg as the API shows them.
func apiDomain(cfg config.Config, svc *broadcast.Service, rd *reads.Reader, tests *testsend.Tester, consents *consent.Book, segments *segment.Catalog, keys *apikey.Keys, audiences *Reloader, jobs []*cron.Compiled) server.Domain {
	d := server.Domain{Submitter: svc, Reader: rd, Tester: tests, Consents: consents, Segments: segments, Keys: keys, Jobs: jobs,
		Audiences: audiences.catalog, ReloadAudiences: audiences.Reload,
		Apps:       server.Apps{Default: cfg.AppOf("")},
		Categories: server.Categories{List: cfg.CategoryList(), Default: cfg.DefaultCategory}}
	for _, a := range cfg.AppList() {
		d.Apps.List = append(d.Apps.List, server.App{Name: a.Name, ProjectID: a.ProjectID, RateLimit: a.RateLimit})
	}
	return d
}

// apiOIDC turns on the console's sign-in through the OIDC provider when
// cfg names one (Validate has checked the settings together), the
// sign-ins kept in store.
func apiOIDC(cfg config.Config, store server.OIDCStateStore) server.Option {
	o := cfg.OIDC
	if !o.On() {
		return func(*server.Server) {}
	}
	roles := make(map[string]model.Role, len(o.Roles))
	for g, r := range o.Roles {
		roles[g] = model.Role(r)
	}
	return server.WithOIDC(sso.New(sso.Config{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
		RedirectURL: cfg.RedirectURL(), RolesClaim: o.RolesClaim, Roles: roles}), store)
}
