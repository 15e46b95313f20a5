package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/memgate/memgate"
)

// MinStaticTokenLen is the shortest MEMGATE_TOKEN accepted.
const MinStaticTokenLen = 16

// StaticSubject is the subject of the MEMGATE_TOKEN principal. A tokens-file
// principal's subject is "static:" and the name the file gives it.
const StaticSubject = "static"

// AdminSubject is the subject of the MEMGATE_ADMIN_TOKEN principal.
const AdminSubject = "admin"

// Bounds of a tokens file.
const (
	maxTokensFileBytes = 16 << 20
	maxTokensFileLine  = 64 << 10
	maxSubjectLen      = 128
)

// tokensReloadEvery is how often the tokens file is checked for a change.
const tokensReloadEvery = time.Second

// StaticTokens are the bearer tokens memgate knows itself: MEMGATE_TOKEN and
// the tokens of a tokens file. It keeps only SHA-256 digests, compares them
// in constant time, and notices an edited tokens file within a second, so
// removing a line revokes its token without a restart. A tokens file that
// no longer reads is not half-used: its tokens are refused (503) until it
// is fixed, so a revocation cannot be undone by a typo.
//
// It is safe for concurrent use.
type StaticTokens struct {
	env  *staticEntry // MEMGATE_TOKEN, or nil
	adm  *staticEntry // MEMGATE_ADMIN_TOKEN, or nil
	path string       // tokens file, or ""
	all  []string     // the scopes of a principal that names none
	log  *slog.Logger

	mu        sync.Mutex
	entries   []staticEntry
	broken    bool
	checked   time.Time // last stat of the file
	modTime   time.Time
	size      int64
	reloadGap time.Duration
}

type staticEntry struct {
	digest    [sha256.Size]byte
	principal memgate.Principal
}

// StaticOptions configure StaticTokens.
type StaticOptions struct {
	// Token is MEMGATE_TOKEN, "" for none: at least MinStaticTokenLen
	// visible characters of a token68. Its principal may use every
	// namespace and holds AllScopes.
	Token string
	// AdminToken is MEMGATE_ADMIN_TOKEN, "" for none: checked as Token is.
	// Its principal, AdminSubject, holds AdminScope only: it reaches the
	// admin API and nothing else.
	AdminToken, AdminScope string
	// File is the path of a tokens file (the format is parseTokensFile's), "" for none.
	File string
	// AllScopes are the scopes of MEMGATE_TOKEN and of a file entry that
	// lists none: the read and the write scope.
	AllScopes []string
	// ReloadEvery is how often the tokens file is checked for a change; 0
	// means once a second.
	ReloadEvery time.Duration
	Logger      *slog.Logger
}

// NewStaticTokens checks the token and reads the tokens file.
func NewStaticTokens(o StaticOptions) (*StaticTokens, error) {
	s := &StaticTokens{path: o.File, all: slices.Clone(o.AllScopes), log: o.Logger, reloadGap: tokensReloadEvery}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if o.ReloadEvery > 0 {
		s.reloadGap = o.ReloadEvery
	}
	if err := CheckEnvTokens(o.Token, o.AdminToken); err != nil {
		return nil, err
	}
	if o.Token != "" {
		s.env = &staticEntry{digest: sha256.Sum256([]byte(o.Token)),
			principal: memgate.Principal{Subject: StaticSubject, Scopes: s.all}}
	}
	if o.AdminToken != "" {
		s.adm = &staticEntry{digest: sha256.Sum256([]byte(o.AdminToken)),
			principal: memgate.Principal{Subject: AdminSubject, Scopes: []string{o.AdminScope}}}
	}
	if s.path != "" {
		if err := s.load(); err != nil {
			return nil, err
		}
	}
	if s.env == nil && s.adm == nil && s.path == "" {
		return nil, errors.New("no static token: set MEMGATE_TOKEN or give a tokens file")
	}
	return s, nil
}

// CheckStaticToken checks a MEMGATE_TOKEN: MinStaticTokenLen to
// MaxTokenBytes characters of a token68 (letters, digits, - . _ ~ + /,
// then = padding), so that it fits an Authorization header unchanged.
func CheckStaticToken(token string) error {
	switch {
	case len(token) < MinStaticTokenLen:
		return fmt.Errorf("MEMGATE_TOKEN must be at least %d characters", MinStaticTokenLen)
	case len(token) > MaxTokenBytes:
		return fmt.Errorf("MEMGATE_TOKEN must be at most %d characters", MaxTokenBytes)
	case !isToken68(token):
		return errors.New("MEMGATE_TOKEN may hold only letters, digits and - . _ ~ + / (then = padding)")
	}
	return nil
}

// CheckEnvTokens checks the tokens of the environment, MEMGATE_TOKEN and
// MEMGATE_ADMIN_TOKEN ("" for either when unset), as NewStaticTokens does.
func CheckEnvTokens(token, adminToken string) error {
	if token != "" {
		if err := CheckStaticToken(token); err != nil {
			return err
		}
	}
	if adminToken != "" {
		if err := CheckStaticToken(adminToken); err != nil {
			return errors.New(strings.Replace(err.Error(), "MEMGATE_TOKEN", "MEMGATE_ADMIN_TOKEN", 1))
		}
		if adminToken == token {
			return errors.New("MEMGATE_ADMIN_TOKEN must differ from MEMGATE_TOKEN")
		}
	}
	return nil
}

// Lookup returns the principal of token, or ok false when it is none of
// these tokens. The error is a failure to read a changed tokens file.
func (s *StaticTokens) Lookup(token string) (p *memgate.Principal, ok bool, err error) {
	d := sha256.Sum256([]byte(token))
	var found *memgate.Principal
	if s.env != nil && subtle.ConstantTimeCompare(d[:], s.env.digest[:]) == 1 {
		found = &s.env.principal
	}
	if s.adm != nil && subtle.ConstantTimeCompare(d[:], s.adm.digest[:]) == 1 {
		found = &s.adm.principal
	}
	if s.path != "" {
		s.mu.Lock()
		s.reloadIfChanged()
		broken := s.broken
		// Every entry is compared, so the time taken says nothing about
		// which entry, if any, matched.
		for i := range s.entries {
			if subtle.ConstantTimeCompare(d[:], s.entries[i].digest[:]) == 1 && found == nil {
				found = &s.entries[i].principal
			}
		}
		s.mu.Unlock()
		if found == nil && broken {
			return nil, false, errTokensFile
		}
	}
	if found == nil {
		return nil, false, nil
	}
	c := *found
	c.Scopes = slices.Clone(c.Scopes)
	c.Namespaces = slices.Clone(c.Namespaces)
	return &c, true, nil
}

// reloadIfChanged rereads the file when its size or time changed. s.mu is held.
func (s *StaticTokens) reloadIfChanged() {
	now := time.Now()
	if now.Sub(s.checked) < s.reloadGap {
		return
	}
	s.checked = now
	fi, err := os.Stat(s.path)
	if err == nil && fi.ModTime().Equal(s.modTime) && fi.Size() == s.size && !s.broken {
		return
	}
	if err := s.loadLocked(); err != nil {
		if !s.broken {
			s.log.Error("the tokens file no longer reads; its tokens are refused until it is fixed",
				"op", "auth.tokens", "error", err)
		}
		s.entries, s.broken = nil, true
		return
	}
	if s.broken {
		s.log.Warn("the tokens file reads again", "op", "auth.tokens")
	}
	s.broken = false
}

func (s *StaticTokens) load() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checked = time.Now()
	return s.loadLocked()
}

func (s *StaticTokens) loadLocked() error {
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("tokens file: %w", pathless(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("tokens file: %w", pathless(err))
	}
	if fi.Size() > maxTokensFileBytes {
		return fmt.Errorf("tokens file: larger than %d bytes", maxTokensFileBytes)
	}
	entries, err := parseTokensFile(io.LimitReader(f, maxTokensFileBytes+1), s.all)
	if err != nil {
		return err
	}
	s.entries, s.modTime, s.size = entries, fi.ModTime(), fi.Size()
	return nil
}

// tokenLine is one line of a tokens file.
type tokenLine struct {
	SHA256     string    `json:"sha256"`
	Subject    string    `json:"subject"`
	Namespaces *[]string `json:"namespaces"`
	Namespace  string    `json:"namespace"`
	Scopes     *[]string `json:"scopes"`
}

// tokenFields are the keys of a tokens-file line.
var tokenFields = []string{"sha256", "subject", "namespaces", "namespace", "scopes"}

// parseTokensFile reads a tokens file: JSON Lines, one token a line, blank
// lines and lines starting with # ignored:
//
//	{"sha256": "<64 hex digits>", "subject": "ci", "namespaces": ["team-a", "team-b"], "namespace": "team-a", "scopes": ["memory:read"]}
//
// sha256 is the SHA-256 of the token (printf %s "$TOKEN" | sha256sum) and
// subject names its holder (1 to 128 of A-Z a-z 0-9 . _ @ : + -); both are
// required and no digest appears twice. namespaces, when present, are the
// only ones the token may use (absent: all; an empty list is refused).
// namespace is the token's own namespace for the token strategy (absent:
// the first of namespaces); it must be one of namespaces. scopes, when
// present, are its scopes; absent, it gets allScopes. Unknown fields are
// refused. Errors name the line, never its content.
func parseTokensFile(r io.Reader, allScopes []string) ([]staticEntry, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxTokensFileLine)
	var (
		entries []staticEntry
		seen    = map[[sha256.Size]byte]int{}
		n       int
	)
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		e, err := parseTokenLine(line, allScopes)
		if err != nil {
			return nil, fmt.Errorf("tokens file line %d: %s", n, err.Error())
		}
		if first, dup := seen[e.digest]; dup {
			return nil, fmt.Errorf("tokens file line %d: the same sha256 as line %d", n, first)
		}
		seen[e.digest] = n
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("tokens file line %d: longer than %d bytes", n+1, maxTokensFileLine)
		}
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	return entries, nil
}

func parseTokenLine(line []byte, allScopes []string) (staticEntry, error) {
	// Keys are matched exactly and only once: encoding/json alone would
	// let "NAMESPACES": null after "namespaces" widen the token to every
	// namespace.
	members, err := memgate.StrictObject(line, tokenFields)
	switch {
	case errors.Is(err, memgate.ErrDuplicateKey):
		return staticEntry{}, errors.New("a field is given twice")
	case errors.Is(err, memgate.ErrUnknownKey):
		return staticEntry{}, errors.New("a field is not one of sha256, subject, namespaces, namespace and scopes (names are lower case)")
	case err != nil:
		return staticEntry{}, errors.New("not a JSON object with the fields sha256, subject, namespaces, namespace and scopes")
	}
	for _, name := range []string{"namespaces", "scopes"} {
		if v, ok := members[name]; ok && string(bytes.TrimSpace(v)) == "null" {
			return staticEntry{}, fmt.Errorf("%s is null; leave it out for the default", name)
		}
	}
	var tl tokenLine
	if err := json.Unmarshal(line, &tl); err != nil {
		return staticEntry{}, errors.New("not a JSON object with the fields sha256, subject, namespaces, namespace and scopes")
	}
	var e staticEntry
	if len(tl.SHA256) != 2*sha256.Size {
		return e, errors.New("sha256 must be 64 hex digits (printf %s \"$TOKEN\" | sha256sum)")
	}
	if _, err := hex.Decode(e.digest[:], []byte(tl.SHA256)); err != nil {
		return e, errors.New("sha256 must be 64 hex digits (printf %s \"$TOKEN\" | sha256sum)")
	}
	if !validSubject(tl.Subject) {
		return e, fmt.Errorf("subject must be 1 to %d of A-Z a-z 0-9 . _ @ : + -", maxSubjectLen)
	}
	e.principal.Subject = StaticSubject + ":" + tl.Subject
	if tl.Namespaces != nil {
		if len(*tl.Namespaces) == 0 {
			return e, errors.New("namespaces is empty; leave it out to allow every namespace")
		}
		for _, ns := range *tl.Namespaces {
			if _, err := memgate.ParseNamespace("namespaces", ns); err != nil {
				return e, fmt.Errorf("namespaces: a namespace must be 1 to %d of a-z 0-9 _ -", memgate.MaxNamespaceLen)
			}
		}
		e.principal.Namespaces = slices.Clone(*tl.Namespaces)
	}
	if tl.Namespace != "" {
		if _, err := memgate.ParseNamespace("namespace", tl.Namespace); err != nil {
			return e, fmt.Errorf("namespace must be 1 to %d of a-z 0-9 _ -", memgate.MaxNamespaceLen)
		}
		if e.principal.Namespaces == nil {
			e.principal.Namespaces = []string{tl.Namespace}
		} else if !slices.Contains(e.principal.Namespaces, tl.Namespace) {
			return e, errors.New("namespace must be one of namespaces")
		}
		e.principal.Namespace = tl.Namespace
	} else if len(e.principal.Namespaces) > 0 {
		e.principal.Namespace = e.principal.Namespaces[0]
	}
	if tl.Scopes == nil {
		e.principal.Scopes = slices.Clone(allScopes)
	} else {
		for _, sc := range *tl.Scopes {
			if !validScope(sc) {
				return e, errors.New("scopes: a scope is 1 to 128 visible characters without spaces, quotes or backslashes")
			}
		}
		e.principal.Scopes = slices.Clone(*tl.Scopes)
	}
	return e, nil
}

func validSubject(s string) bool {
	if s == "" || len(s) > maxSubjectLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == '@' || c == ':' || c == '+' || c == '-' {
			continue
		}
		return false
	}
	return true
}

// ValidScope reports whether s can be a scope name: 1 to 128 visible ASCII
// characters other than the quote and the backslash (RFC 6749 §3.3), so it
// fits a challenge unescaped.
func ValidScope(s string) bool { return validScope(s) }

func validScope(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// pathless returns the reason of a file error without the path, which an
// operator knows and a log need not repeat.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
