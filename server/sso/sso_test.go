package sso

import (
	"testing"

	"pushfan/model"
)

// A person gets the highest role among their mapped groups; "*" counts
// for anyone; no mapped group, no role.
func TestRoleIsTheHighestMappedGroup(t *testing.T) {
	withAny := New(Config{Roles: map[string]model.Role{"push-admins": model.RoleAdmin, "push-approvers": model.RoleApprover,
		"push-senders": model.RoleSender, AnyGroup: model.RoleViewer}})
	without := New(Config{Roles: map[string]model.Role{"push-senders": model.RoleSender, "push-approvers": model.RoleApprover}})
	for _, c := range []struct {
		rp     *Client
		groups []string
		want   model.Role
		ok     bool
	}{
		{withAny, []string{"push-senders", "push-admins", "staff"}, model.RoleAdmin, true},
		{withAny, []string{"push-approvers", "push-senders"}, model.RoleApprover, true},
		{withAny, []string{"push-senders"}, model.RoleSender, true},
		{withAny, []string{"marketing"}, model.RoleViewer, true},
		{withAny, nil, model.RoleViewer, true},
		{without, []string{"push-senders", "push-approvers"}, model.RoleApprover, true},
		{without, []string{"marketing"}, "", false},
		{without, nil, "", false},
	} {
		got, ok := c.rp.Role(c.groups)
		if got != c.want || ok != c.ok {
			t.Errorf("groups %v: %q %v, want %q %v", c.groups, got, ok, c.want, c.ok)
		}
	}
}

// The groups claim may be a list or a single string; the person's name
// is their email, else their name, else their subject.
func TestClaimsAndActor(t *testing.T) {
	claims := map[string]any{"groups": []any{"a", 7, "b"}, "one": "c"}
	if got := listClaim(claims, "groups"); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("list claim: %v", got)
	}
	if got := listClaim(claims, "one"); len(got) != 1 || got[0] != "c" {
		t.Errorf("string claim: %v", got)
	}
	if got := listClaim(claims, "none"); got != nil {
		t.Errorf("missing claim: %v", got)
	}
	for _, c := range []struct {
		id   Identity
		want string
	}{
		{Identity{Subject: "s", Email: "e@x", Name: "N"}, "e@x"},
		{Identity{Subject: "s", Name: "N"}, "N"},
		{Identity{Subject: "s"}, "s"},
	} {
		if a := c.id.Actor(); a.Kind != model.ActorPerson || a.ID != "s" || a.Name != c.want {
			t.Errorf("%+v: actor %+v, want name %s", c.id, a, c.want)
		}
	}
	if got := New(Config{Issuer: "https://login.example.com/realms/x"}).ProviderName(); got != "login.example.com" {
		t.Errorf("provider name %q", got)
	}
}
