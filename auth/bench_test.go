package auth

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func BenchmarkJWTVerify(b *testing.B) {
	testKeys(b)
	c := newClock()
	path := filepath.Join(b.TempDir(), "jwks.json")
	os.WriteFile(path, jwksDoc(b, publicJWK(b, rsaA, "a", "RS256"), publicJWK(b, ecA, "ec", "")), 0o600)
	v, err := NewJWT(JWTOptions{Issuer: testIssuer, Audience: testAudience, JWKSFile: path, Now: c.now})
	if err != nil {
		b.Fatal(err)
	}
	claims := map[string]any{"iss": testIssuer, "aud": testAudience, "sub": "u", "exp": c.unix(time.Hour), "scope": "memory:read"}
	for _, alg := range []struct{ name, kid string }{{"RS256", "a"}, {"ES256", "ec"}} {
		var key any = rsaA
		if alg.name == "ES256" {
			key = ecA
		}
		tok := sign(b, key, alg.name, map[string]any{"kid": alg.kid}, claims)
		b.Run(alg.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := v.Verify(context.Background(), tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkStaticLookup(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		path := filepath.Join(b.TempDir(), "tokens.jsonl")
		var lines []string
		for i := range n {
			lines = append(lines, fmt.Sprintf(`{"sha256":"%s","subject":"s%d"}`, digest(fmt.Sprintf("token-%d-0123456789", i)), i))
		}
		os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o600)
		st, err := NewStaticTokens(StaticOptions{File: path, AllScopes: allScopes})
		if err != nil {
			b.Fatal(err)
		}
		token := fmt.Sprintf("token-%d-0123456789", n-1)
		b.Run(fmt.Sprintf("%d tokens", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok, _ := st.Lookup(token); !ok {
					b.Fatal("not found")
				}
			}
		})
	}
}
