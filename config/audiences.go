package config

// Audience is a named audience from the YAML config (`audiences:`), as
// written there: package audience compiles and checks it.
type Audience struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description" json:"description,omitempty"`
	// Params maps each parameter name to its type (int, string, bool,
	// date: audience.TypeInt, ...).
	Params map[string]string `yaml:"params" json:"params,omitempty"`
	SQL    string            `yaml:"sql" json:"sql"`
	// App is the app whose tokens the audience returns (docs/apps.md);
	// required when several apps are configured.
	App string `yaml:"app" json:"app,omitempty"`
	// FrequencyCap names the cap of its broadcasts (frequency_caps, off
	// or default); "" is the default.
	FrequencyCap string `yaml:"frequency_cap" json:"frequency_cap,omitempty"`
	// Category is the message category of its broadcasts (categories):
	// a broadcast to it that names none is in it, one that names another
	// is refused. "": the broadcast's own, or default_category.
	Category string `yaml:"category" json:"category,omitempty"`
}
