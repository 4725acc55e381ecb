package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Getenv looks a variable up; os.LookupEnv in production, a map in tests.
type Getenv func(key string) (string, bool)

// Load builds the configuration: defaults, then the YAML file named by
// PUSHFAN_CONFIG (if any), then the environment, and validates all of it.
// It returns every problem found, joined, each naming the variable at
// fault.
func Load(getenv Getenv) (Config, error) { return LoadParts(getenv, PartsAll) }

// LoadParts is Load validating only the given parts (a value that does not
// parse is an error whatever the parts).
func LoadParts(getenv Getenv, parts Part) (Config, error) {
	cfg := Defaults()
	if path, ok := getenv("PUSHFAN_CONFIG"); ok && path != "" {
		if err := loadYAML(path, &cfg); err != nil {
			return cfg, fmt.Errorf("PUSHFAN_CONFIG: %w", err)
		}
		cfg.File = path
	}
	var errs []error
	for _, v := range variables(&cfg) {
		raw, ok := getenv(v.name)
		if !ok || raw == "" {
			continue
		}
		if err := v.set(strings.TrimSpace(raw)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", v.name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, err
	}
	return cfg, cfg.ValidateParts(parts)
}

// FromOS loads the configuration from the process environment, validating
// the given parts.
func FromOS(parts Part) (Config, error) { return LoadParts(os.LookupEnv, parts) }

func loadYAML(path string, cfg *Config) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening config file: %w", err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true) // a typo in a key is an error, not a silently ignored setting
	if err := dec.Decode(cfg); err != nil {
		return fmt.Errorf("parsing %s: %w", path, err)
	}
	return nil
}

func str(p *string) func(string) error {
	return func(s string) error { *p = s; return nil }
}

func list(p *[]string) func(string) error {
	return func(s string) error {
		var out []string
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
		*p = out
		return nil
	}
}

func integer(p *int) func(string) error {
	return func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		*p = n
		return nil
	}
}

func int64v(p *int64) func(string) error {
	return func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer number of bytes", s)
		}
		*p = n
		return nil
	}
}

func float(p *float64) func(string) error {
	return func(s string) error {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		*p = f
		return nil
	}
}

func boolean(p *bool) func(string) error {
	return func(s string) error {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not a boolean (use true or false)", s)
		}
		*p = b
		return nil
	}
}

func duration(p *time.Duration) func(string) error {
	return func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration (use e.g. 500ms, 10s, 2m)", s)
		}
		*p = d
		return nil
	}
}
