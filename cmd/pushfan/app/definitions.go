package app

import (
	"errors"
	"fmt"

	"pushfan/audience"
	"pushfan/config"
	"pushfan/cron"
)

// CheckDefinitions compiles the YAML config's named audiences and jobs as
// serve does at start, for what needs no database (serve also prepares
// every audience's query): `pushfan config check` reports their problems
// beside the settings'. package config holds them as written and knows
// nothing of their rules.
func CheckDefinitions(cfg config.Config) error {
	var errs []error
	if _, err := audience.Compile(cfg.AllAudiences()); err != nil {
		errs = append(errs, fmt.Errorf("PUSHFAN_CONFIG: audiences: %w", err))
	}
	if _, err := cron.Compile(cfg.Jobs); err != nil {
		errs = append(errs, fmt.Errorf("PUSHFAN_CONFIG: jobs: %w", err))
	}
	if _, err := compileWebhooks(cfg); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
