package tenants

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"

	"github.com/memgate/memgate"
)

// Strategy names how a request gets its namespace (--namespace-strategy).
type Strategy string

// The strategies.
const (
	Fixed   Strategy = "fixed"   // --namespace, default "default"
	Project Strategy = "project" // from the working directory
	Token   Strategy = "token"   // from the authenticated principal
)

// ParseStrategy checks a strategy name.
func ParseStrategy(s string) (Strategy, error) {
	switch Strategy(s) {
	case Fixed, Project, Token:
		return Strategy(s), nil
	case "":
		return Fixed, nil
	}
	return "", memgate.Invalid("namespace-strategy", "namespace strategy must be fixed, project or token")
}

// Resolver resolves the namespace of one request.
type Resolver struct {
	Strategy Strategy
	// Default is the namespace of the fixed and project strategies.
	Default memgate.Namespace
	// FromSubject lets the token strategy derive a namespace from the
	// principal's subject when its token names none.
	FromSubject bool
	// AllowArg accepts the per-call namespace argument (--namespace-arg).
	AllowArg bool
}

var (
	errNoPrincipal = &memgate.Error{Code: memgate.CodeForbidden,
		Message: "this server takes the namespace from the caller's token, and the call has none"}
	errNoClaim = &memgate.Error{Code: memgate.CodeForbidden,
		Message: "the token names no namespace"}
	errBadClaim = &memgate.Error{Code: memgate.CodeForbidden,
		Message: "the token's namespace is not a valid namespace name"}
	errNotAllowed = &memgate.Error{Code: memgate.CodeForbidden,
		Message: "the token does not allow this namespace"}
	errNoArg = memgate.Invalid("namespace",
		"this server does not take a namespace argument")
)

// Resolve returns the namespace of a call by principal p (nil when the
// transport has no authentication) with namespace argument arg ("" when the
// call has none).
//
// Under the token strategy a principal that names no namespaces of its own
// (a token with no namespace list, its namespace derived from its subject)
// may use its own namespace and no other, even with --namespace-arg: a
// per-user namespace is not a suggestion.
func (r *Resolver) Resolve(p *memgate.Principal, arg string) (memgate.Namespace, error) {
	var own memgate.Namespace // the token's namespace, under the token strategy
	if r.Strategy == Token {
		if p == nil {
			return "", errNoPrincipal
		}
		switch {
		case p.Namespace != "":
			var err error
			if own, err = memgate.ParseNamespace("namespace", p.Namespace); err != nil {
				return "", errBadClaim
			}
		case r.FromSubject && p.Subject != "":
			own = SubjectNamespace(p.Subject)
		default:
			return "", errNoClaim
		}
	}
	var ns memgate.Namespace
	switch {
	case arg != "":
		if !r.AllowArg {
			return "", errNoArg
		}
		var err error
		if ns, err = memgate.ParseNamespace("namespace", arg); err != nil {
			return "", err
		}
	case r.Strategy == Token:
		ns = own
	default:
		ns = r.Default
		if ns == "" {
			ns = memgate.DefaultNamespace
		}
	}
	if p != nil && !p.MayUse(string(ns)) {
		return "", errNotAllowed
	}
	if r.Strategy == Token && len(p.Namespaces) == 0 && ns != own {
		return "", errNotAllowed
	}
	return ns, nil
}

// ProjectNamespace is the namespace of the project strategy for folder dir:
// the folder's name, lowered, with characters outside [a-z0-9_-] replaced by
// '-' and cut to 55 bytes, then '-' and the first 8 hex digits of the
// SHA-256 of the absolute path. Two folders with the same name never share a
// namespace.
func ProjectNamespace(dir string) (memgate.Namespace, error) {
	b, err := BindProject(dir)
	return b.Namespace, err
}

// ProjectBinding ties a project namespace to the folder it comes from. The
// namespace keeps 32 bits of the path's hash, and folders whose names differ
// only in case, punctuation or past 55 bytes share its visible part, so two
// folders can share a namespace; the full hash, kept beside the store (a
// Pool with Options.Project), tells them apart.
type ProjectBinding struct {
	Namespace memgate.Namespace
	// PathHash is the hex SHA-256 of the folder's absolute path.
	PathHash string
}

// pathSum hashes a project folder's absolute path; tests replace it.
var pathSum = sha256.Sum256

// BindProject returns the namespace of the project strategy for folder dir
// (ProjectNamespace) and the full hash of its absolute path.
func BindProject(dir string) (ProjectBinding, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ProjectBinding{}, memgate.Invalid("project", "the working directory has no absolute path")
	}
	sum := pathSum([]byte(abs))
	name := strings.Trim(memgate.SanitizeNamespace(filepath.Base(abs), memgate.MaxNamespaceLen-9), "-")
	if name == "" {
		name = "project"
	}
	return ProjectBinding{Namespace: memgate.Namespace(name + "-" + hex.EncodeToString(sum[:4])),
		PathHash: hex.EncodeToString(sum[:])}, nil
}

// SubjectNamespace derives a per-user namespace from a principal's subject:
// "u-" and the first 32 hex digits of SHA-256("memgate-subject\x00" +
// subject). It is stable (the same subject always maps to the same store),
// reveals nothing of the subject on disk, and two subjects collide only with
// probability 2^-128.
//
// The subject of a JWT or introspected token is "<issuer>|<sub>" (package
// auth), so the namespace depends on both: the same sub from another issuer
// is another user with another store. A static token's subject is "static"
// or "static:<name>".
func SubjectNamespace(subject string) memgate.Namespace {
	sum := sha256.Sum256([]byte("memgate-subject\x00" + subject))
	return memgate.Namespace("u-" + hex.EncodeToString(sum[:16]))
}

// IssuerSubjectNamespace is the namespace --namespace-from-subject gives the
// holder of a token with subject sub from issuer: SubjectNamespace of the
// principal's subject "<issuer>|<sub>". It lets an operator find a user's
// store.
func IssuerSubjectNamespace(issuer, sub string) memgate.Namespace {
	return SubjectNamespace(issuer + "|" + sub)
}
