package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

func jsonBody(t *testing.T, v any) io.Reader {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(raw)
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func decode(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decoding %q: %v", raw, err)
	}
}

// coveredBy skips, in short mode (make test-short), an end-to-end test
// whose rule the tests of a domain package keep (where names them):
// make test runs it, through HTTP, the real stack and the emulator.
func coveredBy(t *testing.T, where string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("end to end: its rule is tested in %s; make test runs it, make test-short does not", where)
	}
}
