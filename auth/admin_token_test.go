package auth

import (
	"slices"
	"strings"
	"testing"
)

// MEMGATE_ADMIN_TOKEN is a principal of its own holding the admin scope
// only; it is checked as MEMGATE_TOKEN is and may not equal it.
func TestAdminToken(t *testing.T) {
	s, err := NewStaticTokens(StaticOptions{AdminToken: "admin-token-0123456789", AdminScope: "memory:admin",
		Token: "user-token-0123456789", AllScopes: []string{"memory:read", "memory:write"}})
	if err != nil {
		t.Fatal(err)
	}
	p, ok, err := s.Lookup("admin-token-0123456789")
	if err != nil || !ok || p.Subject != AdminSubject || !slices.Equal(p.Scopes, []string{"memory:admin"}) {
		t.Fatalf("%+v %v %v", p, ok, err)
	}
	if p, _, _ := s.Lookup("user-token-0123456789"); p == nil || p.HasScope("memory:admin") {
		t.Fatalf("MEMGATE_TOKEN: %+v", p)
	}
	for _, c := range []struct{ name, admin, user, want string }{
		{"a short admin token is refused", "short", "", "MEMGATE_ADMIN_TOKEN must be at least"},
		{"the same token for both is refused", "same-token-0123456789", "same-token-0123456789", "must differ"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewStaticTokens(StaticOptions{AdminToken: c.admin, AdminScope: "memory:admin", Token: c.user})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v", err)
			}
		})
	}
}
