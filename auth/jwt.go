package auth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/memgate/memgate"
)

// DefaultAlgorithms are the signature algorithms a JWT may use: asymmetric
// ones only. HMAC (HS*) is never accepted: its key would be a secret that the
// JWKS, a public document, cannot hold; and "none" is no signature at all.
var DefaultAlgorithms = []string{
	"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
	"ES256", "ES384", "ES512", "EdDSA",
}

// DefaultClockSkew is the leeway for exp, nbf and iat.
const DefaultClockSkew = 30 * time.Second

// JWTOptions configure a JWT verifier.
type JWTOptions struct {
	// Issuer is the exact iss every token must carry; Audience must be in
	// its aud. Both are required.
	Issuer   string
	Audience string
	// JWKSURL (https; http only on a loopback host) or JWKSFile: where the
	// verification keys are. Exactly one.
	JWKSURL  string
	JWKSFile string
	// CAFile, when set, holds the only certificates trusted for JWKSURL.
	CAFile string
	// Algorithms narrows DefaultAlgorithms; empty means all of them.
	Algorithms []string
	// ClockSkew is the leeway for exp, nbf and iat (0: none).
	ClockSkew time.Duration
	// NamespaceClaim names the claim with the token's namespaces
	// (default DefaultNamespaceClaim).
	NamespaceClaim string
	// Refresh is how old the keys get before they are fetched again in
	// the background (default DefaultJWKSRefresh). FetchTimeout bounds one
	// fetch (default 5s). MinRefetch is the least time between two fetches
	// (default 10s); MaxKeyAge drops keys not refreshed for that long
	// (default 24h).
	Refresh, FetchTimeout, MinRefetch, MaxKeyAge time.Duration
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// JWT verifies signed JWT access tokens.
type JWT struct {
	issuer, audience string
	algs             []jwa.SignatureAlgorithm
	skew             time.Duration
	nsClaim          string
	keys             *keyCache
	now              func() time.Time
}

// NewJWT checks o and returns its verifier. With a JWKS URL, nothing is
// fetched yet: the first token does that, so memgate starts while the
// identity service is down (and answers 503 until it is up).
func NewJWT(o JWTOptions) (*JWT, error) {
	if o.Issuer == "" || o.Audience == "" {
		return nil, errors.New("a JWT issuer and audience are both required")
	}
	j := &JWT{issuer: o.Issuer, audience: o.Audience, skew: o.ClockSkew, nsClaim: o.NamespaceClaim, now: o.Now}
	if j.nsClaim == "" {
		j.nsClaim = DefaultNamespaceClaim
	}
	if j.now == nil {
		j.now = time.Now
	}
	names := o.Algorithms
	if len(names) == 0 {
		names = DefaultAlgorithms
	}
	for _, n := range names {
		if !slices.Contains(DefaultAlgorithms, n) {
			return nil, fmt.Errorf("JWT algorithm %q is not one of %s", n, strings.Join(DefaultAlgorithms, ", "))
		}
		j.algs = append(j.algs, jwa.SignatureAlgorithm(n))
	}
	switch {
	case o.JWKSURL != "" && o.JWKSFile != "":
		return nil, errors.New("a JWKS URL or a JWKS file, not both")
	case o.JWKSFile != "":
		k, err := fileKeys(o.JWKSFile)
		if err != nil {
			return nil, err
		}
		j.keys = k
	case o.JWKSURL != "":
		if _, err := checkServiceURL(o.JWKSURL, true); err != nil {
			return nil, fmt.Errorf("JWKS URL: %w", err)
		}
		roots, err := rootCAs(o.CAFile)
		if err != nil {
			return nil, err
		}
		k := &keyCache{url: o.JWKSURL, refresh: o.Refresh, minGap: o.MinRefetch, maxAge: o.MaxKeyAge, now: j.now, log: o.Logger}
		timeout := o.FetchTimeout
		if timeout <= 0 {
			timeout = DefaultTimeout
		}
		k.client = newClient(roots, timeout, true)
		if k.refresh <= 0 {
			k.refresh = DefaultJWKSRefresh
		}
		if k.minGap <= 0 {
			k.minGap = defaultMinRefetch
		}
		if k.maxAge <= 0 {
			k.maxAge = defaultMaxKeyAge
		}
		if k.log == nil {
			k.log = slog.New(slog.DiscardHandler)
		}
		j.keys = k
	default:
		return nil, errors.New("a JWKS URL or a JWKS file is required")
	}
	return j, nil
}

// Issuer returns the issuer tokens must name.
func (j *JWT) Issuer() string { return j.issuer }

// Verify checks token and returns its principal and expiry.
func (j *JWT) Verify(ctx context.Context, token string) (*memgate.Principal, time.Time, error) {
	if len(token) > MaxTokenBytes {
		return nil, time.Time{}, errTooLarge
	}
	if !isCompactJWS(token) || !strictJOSE(token) {
		return nil, time.Time{}, errBadToken
	}
	var unavailable bool
	provider := jws.KeyProviderFunc(func(ctx context.Context, sink jws.KeySink, sig *jws.Signature, _ *jws.Message) error {
		alg := sig.ProtectedHeaders().Algorithm()
		if !slices.Contains(j.algs, alg) {
			return errBadToken
		}
		kid := sig.ProtectedHeaders().KeyID()
		set := j.keys.keys(ctx)
		if set == nil {
			unavailable = true
			return errUnavailable
		}
		key, ok := lookupKey(set, kid)
		if !ok {
			// A key the cache does not know may be a new one: ask again
			// (at most once per minGap, however many tokens ask).
			if set = j.keys.refetch(ctx); set == nil {
				unavailable = true
				return errUnavailable
			}
			if key, ok = lookupKey(set, kid); !ok {
				return errBadToken
			}
		}
		if !keyFits(key, alg) {
			return errBadToken
		}
		sink.Key(alg, key)
		return nil
	})
	tok, err := jwt.ParseString(token,
		jwt.WithKeyProvider(provider),
		jwt.WithValidate(true),
		jwt.WithIssuer(j.issuer),
		jwt.WithAudience(j.audience),
		jwt.WithRequiredClaim(jwt.ExpirationKey),
		jwt.WithAcceptableSkew(j.skew),
		jwt.WithClock(jwt.ClockFunc(j.now)),
		jwt.WithContext(ctx),
	)
	switch {
	case unavailable:
		return nil, time.Time{}, errUnavailable
	case errors.Is(err, jwt.ErrTokenExpired()):
		return nil, time.Time{}, errExpired
	case err != nil:
		return nil, time.Time{}, errBadToken
	}
	claims := tok.PrivateClaims()
	p, err := principalOf(j.issuer, tok.Subject(), claims, j.nsClaim)
	if err != nil {
		return nil, time.Time{}, err
	}
	// The leeway that admitted the token holds until it is refused here.
	return p, tok.Expiration().Add(j.skew), nil
}

// lookupKey finds the key a token names. A token without kid may use the
// only key of a one-key set, and no other.
func lookupKey(set jwk.Set, kid string) (jwk.Key, bool) {
	if kid == "" {
		if set.Len() != 1 {
			return nil, false
		}
		return set.Key(0)
	}
	return set.LookupKeyID(kid)
}

// keyFits reports whether key may verify a signature made with alg: the
// key's own alg when it states one, else one its type allows (so an RSA key
// takes RS* and PS*, never HS256).
func keyFits(key jwk.Key, alg jwa.SignatureAlgorithm) bool {
	if ka := key.Algorithm().String(); ka != "" {
		return ka == alg.String()
	}
	algs, err := jws.AlgorithmsForKey(key)
	return err == nil && slices.Contains(algs, alg)
}

// isCompactJWS reports whether s has the shape of a compact JWS: three
// base64url parts, the first two not empty. JSON serialisations and JWE
// (five parts) are not access tokens here.
func isCompactJWS(s string) bool {
	parts := 0
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			c := s[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
			continue
		}
		if i-start == 0 && parts < 2 {
			return false
		}
		parts++
		start = i + 1
	}
	return parts == 3
}

// strictJOSE checks what jwx lets through of a compact JWS: its header and
// claims are JSON objects with no key given twice (two readers could see
// two tokens); the header has no crit, since memgate understands no
// extension, and RFC 7515 §4.1.11 makes a crit that is empty or names a
// registered header invalid anyway; and exp, nbf and iat, when present, are
// JSON numbers (RFC 7519 NumericDate), not strings or dates.
func strictJOSE(token string) bool {
	head, rest, _ := strings.Cut(token, ".")
	body, _, _ := strings.Cut(rest, ".")
	h, err := decodeJOSEPart(head)
	if err != nil {
		return false
	}
	if _, crit := h["crit"]; crit {
		return false
	}
	claims, err := decodeJOSEPart(body)
	if err != nil {
		return false
	}
	for _, name := range []string{jwt.ExpirationKey, jwt.NotBeforeKey, jwt.IssuedAtKey} {
		v, ok := claims[name]
		if !ok {
			continue
		}
		var n json.Number
		if v = bytes.TrimSpace(v); len(v) == 0 || !(v[0] == '-' || '0' <= v[0] && v[0] <= '9') || json.Unmarshal(v, &n) != nil {
			return false
		}
	}
	return true
}

// decodeJOSEPart decodes one base64url part of a compact JWS into the
// members of its JSON object, keys exact and once.
func decodeJOSEPart(part string) (map[string]json.RawMessage, error) {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return nil, err
	}
	return memgate.StrictObject(b, nil)
}
