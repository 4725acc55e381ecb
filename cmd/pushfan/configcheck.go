package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"pushfan/cmd/pushfan/app"
	"pushfan/config"
	"pushfan/internal/platform/sqldb"
	"pushfan/repository"
)

const configUsage = `usage: pushfan config check
       pushfan config doc

check loads the configuration as serve does (the environment, plus the YAML file
named by PUSHFAN_CONFIG) and prints the effective value of every variable as
NAME=value, with tokens and the DSN password masked. A schema: section is
checked against the database (tables, columns, conditions, on_dead) exactly as
serve checks it at start-up. When the configuration is
invalid it lists every problem, one per line, on stderr and exits 1.

doc prints the configuration reference (docs/configuration.md) in Markdown:
every variable with what it does, its default, its bounds and its YAML key,
from the same table the loader uses (make docs writes the page).
`

// configCommand runs `pushfan config <subcommand>`: check or doc.
func configCommand(args []string, getenv config.Getenv, stdout, stderr io.Writer) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, configUsage)
		return nil
	}
	switch {
	case len(args) == 1 && args[0] == "check":
		return configCheck(getenv, stdout, stderr)
	case len(args) == 1 && args[0] == "doc":
		// The reference depends on the code only, never on the
		// environment, so the committed page is the same on every machine.
		return config.Reference(stdout)
	}
	fmt.Fprint(stderr, configUsage)
	return fmt.Errorf("usage: pushfan config check|doc (got %q)", strings.Join(args, " "))
}

// configCheck prints the effective configuration with secrets masked, or
// every problem when it is invalid.
func configCheck(getenv config.Getenv, stdout, stderr io.Writer) error {
	cfg, err := config.Load(getenv)
	if err == nil {
		err = app.CheckDefinitions(cfg)
	}
	if err == nil && (cfg.Schema.Mapped() || appSchemas(cfg)) {
		err = checkSchema(cfg)
	}
	if err != nil {
		problems := configProblems(cfg, err)
		fmt.Fprintf(stderr, "the configuration is invalid (%d %s):\n", len(problems), plural(len(problems), "problem", "problems"))
		for _, p := range problems {
			fmt.Fprintf(stderr, "  %s\n", p)
		}
		return fmt.Errorf("configuration check failed: %d %s", len(problems), plural(len(problems), "problem", "problems"))
	}
	byName := map[string]config.Setting{}
	for _, s := range cfg.Effective() {
		byName[s.Name] = s
	}
	fmt.Fprintln(stdout, "# pushfan effective configuration (secrets masked)")
	for _, name := range config.Variables() {
		if name == "PUSHFAN_CONFIG" {
			path, _ := getenv(name)
			fmt.Fprintf(stdout, "%s=%s\n", name, path)
			continue
		}
		if s, ok := byName[name]; ok {
			fmt.Fprintf(stdout, "%s=%s\n", s.Name, s.Value)
		}
	}
	for _, a := range cfg.AppList() {
		endpoint := a.Endpoint
		if endpoint == "" {
			endpoint = "FCM"
		}
		fmt.Fprintf(stdout, "# app %s: project %s, %v messages/s, %s\n", a.Name, a.ProjectID, a.RateLimit, endpoint)
	}
	fmt.Fprintln(stdout, "# the configuration is valid")
	return nil
}

// checkSchema checks the schema mapping against the database exactly as
// serve's start-up does, so a mistyped column is found before a deploy.
func checkSchema(cfg config.Config) error {
	sc, err := repository.CompileSchema(cfg.Schema)
	if err == nil {
		_, err = sc.WithStaleAfter(cfg.Engine.StaleAfter)
	}
	if err != nil {
		return err // no database needed to see these
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DB.Timeout)
	defer cancel()
	pool, err := sqldb.Open(ctx, cfg.MySQLDSN, 1, nil)
	if err != nil {
		return fmt.Errorf("schema: checking it needs the database: PUSHFAN_MYSQL_DSN: %w", err)
	}
	defer pool.Close()
	if _, err = app.CheckSchema(ctx, cfg, pool); err != nil {
		return err
	}
	_, err = app.CheckAppSchemas(ctx, cfg, pool)
	return err
}

// appSchemas reports whether an app maps tables of its own.
func appSchemas(cfg config.Config) bool {
	for _, a := range cfg.Apps {
		if a.Schema != nil {
			return true
		}
	}
	return false
}

// configProblems lists every problem in err, one per entry. Load stops
// before validation when a value does not parse; the partly loaded cfg
// (failed values left at their defaults) is validated too, so that a single
// run reports the parse errors and the rule violations together. A broken
// PUSHFAN_CONFIG file is reported alone: the environment was not applied.
func configProblems(cfg config.Config, err error) []string {
	problems := flattenErrors(err)
	if len(problems) > 0 && strings.HasPrefix(problems[0], "PUSHFAN_CONFIG:") {
		return problems
	}
	seen := map[string]bool{}
	for _, p := range problems {
		seen[p] = true
	}
	for _, verr := range []error{cfg.Validate(), app.CheckDefinitions(cfg)} {
		for _, p := range flattenErrors(verr) {
			if !seen[p] {
				seen[p] = true
				problems = append(problems, p)
			}
		}
	}
	return problems
}

// flattenErrors unwraps errors.Join trees into one line per problem; a
// multi-line message keeps its continuation lines indented under it.
func flattenErrors(err error) []string {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, flattenErrors(e)...)
		}
		return out
	}
	return []string{strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "\n    ")}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
