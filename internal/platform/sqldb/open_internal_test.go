package sqldb

import (
	"strings"
	"testing"
)

func TestValidateDatabaseName(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"pushfan": true, "pushfan_t_0a1b": true, "A9_": true,
		"": false, "bad-name": false, "x`y": false, "x y": false, "é": false, strings.Repeat("a", 65): false,
	} {
		if err := validateDatabaseName(name); (err == nil) != ok {
			t.Errorf("validateDatabaseName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}
