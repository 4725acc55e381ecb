package audience

import (
	"errors"
	"testing"
)

// FuzzBindJSON feeds arbitrary parameter JSON to the binder of an audience
// with one parameter of every type: it must never panic, and everything it
// accepts must be the declared types.
func FuzzBindJSON(f *testing.F) {
	as, err := Compile([]Definition{{
		Name:   "fuzz",
		Params: map[string]string{"n": TypeInt, "s": TypeString, "b": TypeBool, "d": TypeDate},
		SQL:    "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t WHERE t.id > :after AND :n > 0 AND :s <> '' AND :b AND :d < NOW() ORDER BY t.id LIMIT :limit",
	}})
	if err != nil {
		f.Fatal(err)
	}
	a := as[0]
	for _, seed := range []string{
		`{"n":3,"s":"en","b":true,"d":"2026-12-01"}`,
		`{"n":3.5,"s":1,"b":"yes","d":"tomorrow"}`,
		`{"n":1e300,"s":"x' OR '1'='1","b":false,"d":"2026-02-30"}`,
		`{}`, `null`, ``, `[`, `{"extra":1}`, `{"n":-9007199254740993}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		b, err := a.BindJSON(raw)
		if err != nil {
			var pe *ParamError
			if errors.As(err, &pe) && len(pe.Problems) == 0 {
				t.Fatalf("a ParamError without problems for %q", raw)
			}
			return
		}
		ps := b.Params()
		if len(ps) != 4 {
			t.Fatalf("accepted %q with params %v", raw, ps)
		}
		if _, ok := ps["n"].(int64); !ok {
			t.Fatalf("n bound as %T from %q", ps["n"], raw)
		}
		if _, ok := ps["b"].(bool); !ok {
			t.Fatalf("b bound as %T from %q", ps["b"], raw)
		}
		if _, err := b.ParamsJSON(); err != nil {
			t.Fatalf("bound params do not encode: %v", err)
		}
	})
}
