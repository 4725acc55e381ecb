package segment_test

import (
	"errors"
	"testing"

	"pushfan/internal/testsupport/testdb"
	"pushfan/segment"
)

// The catalog answers a field's values from the store (an empty list on
// an empty table, not nil) and refuses, naming field, no field, an
// unknown one and one of a kind with no values, before any read.
func TestCatalogValues(t *testing.T) {
	db := testdb.New(t)
	c := segment.New(db.Store, segment.Options{})
	ctx := t.Context()
	v, err := c.Values(ctx, "platform")
	if err != nil || v.Field != "platform" || v.Values == nil || len(v.Values) != 0 || v.Sampled {
		t.Fatalf("values of an empty table: %+v, %v", v, err)
	}
	db.SQL.MustExec("INSERT INTO users (id, locale) VALUES (1, 'gsw-CH'), (2, 'gsw-CH'), (3, 'de')")
	db.SQL.MustExec("INSERT INTO device_tokens (user_id, token) VALUES (1, 'a'), (2, 'b'), (3, 'c'), (3, 'd'), (3, 'e')")
	v, err = c.Values(ctx, "locale")
	if err != nil || len(v.Values) != 2 || v.Values[0] != (segment.Value{Value: "de", Tokens: 3}) || v.Values[1] != (segment.Value{Value: "gsw-CH", Tokens: 2}) {
		t.Fatalf("values of locale: %+v, %v", v, err)
	}
	for field, code := range map[string]string{"": "missing_field", "nope": "invalid_field", "user_id": "invalid_field", "last_seen": "invalid_field"} {
		var fe *segment.FieldError
		if _, err := c.Values(ctx, field); !errors.As(err, &fe) || fe.Field != "field" || fe.Code != code {
			t.Errorf("%q: %v, want a %s naming field", field, err, code)
		}
	}
}
