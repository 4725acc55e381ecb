package server_test

import (
	"net/http"
	"testing"

	"pushfan/audit"
)

// A key's create and revoke each write one entry, in their transaction
// (apikey.Options.OnWrite), naming the key.
func TestKeysAreAudited(t *testing.T) {
	t.Parallel()
	s := auditStack(t)
	var k struct {
		ID string `json:"id"`
	}
	if r := s.Do(http.MethodPost, "/push/keys", map[string]any{"name": "ci", "role": "sender"}, &k); r.StatusCode != http.StatusCreated {
		t.Fatalf("create %d", r.StatusCode)
	}
	if r := s.Do(http.MethodDelete, "/push/keys/"+k.ID, nil, nil); r.StatusCode != http.StatusOK && r.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke %d", r.StatusCode)
	}
	got := auditEntries(t, s, "")
	if len(got) != 2 || got[1].Action != audit.KeyCreate || got[1].Target != "key:"+k.ID || got[0].Action != audit.KeyRevoke || got[0].Target != "key:"+k.ID {
		t.Fatalf("%+v", got)
	}
}
