package server

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Kinds of secret that remember refuses: details.kind of secret_detected.
const (
	SecretPrivateKey   = "private_key"
	SecretAWSAccessKey = "aws_access_key"
	SecretGoogleAPIKey = "google_api_key"
	SecretGitHubToken  = "github_token"
	SecretGitLabToken  = "gitlab_token"
	SecretSlackToken   = "slack_token"
	SecretStripeKey    = "stripe_key"
	SecretAnthropicKey = "anthropic_key"
	SecretOpenAIKey    = "openai_key"
	SecretJWT          = "jwt"
	SecretURLPassword  = "url_password"
)

// secretRule recognises one kind of credential by the literal prefix it
// starts with. Only where a prefix occurs does the rule's expression run,
// anchored there and on a bounded window, so the check costs a few substring
// scans on ordinary text and stays linear on text made of prefixes.
type secretRule struct {
	kind     string
	prefixes []string
	// notAfter holds the characters that must not come right before the
	// prefix: a key-shaped run inside a longer word is not a key.
	notAfter string
	re       *regexp.Regexp // anchored with ^
	// ok, when set, rejects a match that is not a credential after all.
	ok func(match string) bool
}

// Character sets for secretRule.notAfter.
const (
	alnum      = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	tokenChars = alnum + "_-"
)

// secretWindow bounds the text an expression sees after a prefix. Every
// pattern decides within it; longer tokens are caught by their start.
const secretWindow = 1024

var secretRules = []secretRule{
	{kind: SecretAWSAccessKey, prefixes: []string{"AKIA", "ASIA"}, notAfter: alnum,
		re: regexp.MustCompile(`^(?:AKIA|ASIA)[A-Z0-9]{16}(?:$|[^A-Za-z0-9])`)},
	{kind: SecretGoogleAPIKey, prefixes: []string{"AIza"}, notAfter: tokenChars,
		re: regexp.MustCompile(`^AIza[0-9A-Za-z_-]{35}(?:$|[^0-9A-Za-z_-])`)},
	{kind: SecretGitHubToken, prefixes: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, notAfter: alnum + "_",
		re: regexp.MustCompile(`^gh[pousr]_[A-Za-z0-9]{36,255}(?:$|[^A-Za-z0-9_])`)},
	{kind: SecretGitHubToken, prefixes: []string{"github_pat_"}, notAfter: alnum + "_",
		re: regexp.MustCompile(`^github_pat_[A-Za-z0-9_]{36}`)},
	{kind: SecretGitLabToken, prefixes: []string{"glpat-"}, notAfter: tokenChars,
		re: regexp.MustCompile(`^glpat-[A-Za-z0-9_-]{20}`)},
	{kind: SecretSlackToken, prefixes: []string{"xox"}, notAfter: tokenChars,
		re: regexp.MustCompile(`^xox[a-z]-[A-Za-z0-9-]{10,}`), ok: hasDigits},
	{kind: SecretStripeKey, prefixes: []string{"sk_live_", "rk_live_"}, notAfter: tokenChars,
		re: regexp.MustCompile(`^[sr]k_live_[0-9A-Za-z]{10}`)},
	{kind: SecretAnthropicKey, prefixes: []string{"sk-ant-"}, notAfter: tokenChars,
		re: regexp.MustCompile(`^sk-ant-[A-Za-z0-9_-]{20}`)},
	// An OpenAI-style key is "sk-" and a long random body. Kebab-case words
	// such as sk-learn-compatible-estimator are not, so the body must mix
	// upper case, lower case and digits.
	{kind: SecretOpenAIKey, prefixes: []string{"sk-"}, notAfter: tokenChars,
		re: regexp.MustCompile(`^sk-[A-Za-z0-9_-]{20,}`), ok: randomBody},
	{kind: SecretJWT, prefixes: []string{"eyJ"}, notAfter: tokenChars,
		re: regexp.MustCompile(`^eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16}`)},
}

// detectSecret returns the kind of the first secret found in s, or "".
func detectSecret(s string) string {
	if privateKey(s) {
		return SecretPrivateKey
	}
	for i := range secretRules {
		if secretRules[i].find(s) {
			return secretRules[i].kind
		}
	}
	if urlPassword(s) {
		return SecretURLPassword
	}
	return ""
}

func (r *secretRule) find(s string) bool {
	for _, prefix := range r.prefixes {
		for from := 0; from < len(s); {
			i := strings.Index(s[from:], prefix)
			if i < 0 {
				break
			}
			i += from
			from = i + len(prefix)
			if i > 0 && strings.IndexByte(r.notAfter, s[i-1]) >= 0 {
				continue
			}
			m := r.re.FindString(s[i:min(len(s), i+secretWindow)])
			if m == "" {
				continue
			}
			if r.ok == nil || r.ok(m) {
				return true
			}
			from = i + len(m) // a rejected token: its inside is no new start
		}
	}
	return false
}

// privateKey reports whether s holds a key block: the armour line
// ("-----BEGIN ... PRIVATE KEY-----", or "PRIVATE KEY BLOCK") and a body of
// base64 (16 characters), perhaps after "Proc-Type:"-style header lines,
// with real line breaks, spaces, or "\n" escapes as in a JSON
// service-account file; or the armour line and its END line within 900
// bytes, whatever lies between. The armour line alone, as in code that
// parses PEM, is not a key.
//
// It is written by hand, not as an expression run at every armour line,
// so that it stays linear on text made of armour lines: each byte is read
// a bounded number of times. A body is looked for only up to the next
// armour line, and the END lines are met in one pass, each checked once.
func privateKey(s string) bool {
	const begin, end = "-----BEGIN ", "-----END "
	nextEnd := -1 // the start of the first valid END line at or after the cursor, once known
	endFrom := 0  // where the search for it resumes
	for from := 0; ; {
		i := strings.Index(s[from:], begin)
		if i < 0 {
			return false
		}
		i += from
		from = i + len(begin)
		armour := keyLabel(s, from)
		if armour < 0 {
			continue
		}
		limit := min(len(s), i+secretWindow)
		if j := strings.Index(s[armour:limit], begin); j >= 0 {
			limit = armour + j
		}
		if keyBody(s, armour, limit) {
			return true
		}
		// An END line within 900 bytes of the armour line.
		for nextEnd < armour {
			j := strings.Index(s[max(endFrom, armour):], end)
			if j < 0 {
				nextEnd = len(s) + 1
				break
			}
			j += max(endFrom, armour)
			endFrom = j + len(end)
			if keyLabel(s, endFrom) >= 0 {
				nextEnd = j
			}
		}
		if nextEnd <= len(s) && nextEnd-armour <= 900 {
			return true
		}
	}
}

// keyLabel reads a key's armour label at p, "(WORD )*PRIVATE KEY( BLOCK)?-----",
// and returns where it ends, or -1.
func keyLabel(s string, p int) int {
	q := p
	for q < len(s) && q-p < secretWindow && (s[q] == ' ' || 'A' <= s[q] && s[q] <= 'Z' || '0' <= s[q] && s[q] <= '9') {
		q++
	}
	if !strings.HasPrefix(s[q:], "-----") {
		return -1
	}
	label := s[p:q]
	var words string
	switch {
	case strings.HasSuffix(label, "PRIVATE KEY BLOCK"):
		words = label[:len(label)-len("PRIVATE KEY BLOCK")]
	case strings.HasSuffix(label, "PRIVATE KEY"):
		words = label[:len(label)-len("PRIVATE KEY")]
	default:
		return -1
	}
	// words is (WORD )*: no leading, doubled or missing space.
	for w := words; w != ""; {
		sp := strings.IndexByte(w, ' ')
		if sp <= 0 {
			return -1
		}
		w = w[sp+1:]
	}
	return q + len("-----")
}

// keyBody reports whether s[p:limit] starts with a key's body: space, then
// header lines ("Name: value" and a line break or "\n" escape), then 16
// base64 characters, each perhaps after space.
func keyBody(s string, p, limit int) bool {
	q := skipKeySpace(s, p, limit)
	if q == p {
		return false
	}
	for p = q; ; {
		if base64Run(s, p, limit) {
			return true
		}
		// A header line.
		n := p
		for n < limit && (s[n] == '-' || 'A' <= s[n] && s[n] <= 'Z' || 'a' <= s[n] && s[n] <= 'z') {
			n++
		}
		if n == p || n == limit || s[n] != ':' {
			return false
		}
		for n++; n < limit && s[n] != '\n' && s[n] != '\\'; n++ {
		}
		switch {
		case n < limit && s[n] == '\n':
			p = n + 1
		case n+1 < limit && s[n] == '\\' && s[n+1] == 'n':
			p = n + 2
		default:
			return false
		}
	}
}

// skipKeySpace skips spaces, tabs, line breaks and "\r" or "\n" escapes.
func skipKeySpace(s string, p, limit int) int {
	for p < limit {
		switch {
		case s[p] == ' ' || s[p] == '\t' || s[p] == '\r' || s[p] == '\n':
			p++
		case s[p] == '\\' && p+1 < limit && (s[p+1] == 'r' || s[p+1] == 'n'):
			p += 2
		default:
			return p
		}
	}
	return p
}

// base64Run reports whether 16 base64 characters start at p, each perhaps
// after space.
func base64Run(s string, p, limit int) bool {
	for range 16 {
		p = skipKeySpace(s, p, limit)
		if p == limit {
			return false
		}
		c := s[p]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
		p++
	}
	return true
}

func hasDigits(s string) bool { return strings.ContainsAny(s, "0123456789") }

func randomBody(m string) bool {
	body := m[len("sk-"):]
	return strings.ContainsAny(body, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") &&
		strings.ContainsAny(body, "abcdefghijklmnopqrstuvwxyz") &&
		hasDigits(body)
}

// urlPassword reports whether s holds a URL with a password in its user
// information, scheme://user:password@host, that is not a placeholder.
func urlPassword(s string) bool {
	for from := 0; from < len(s); {
		i := strings.Index(s[from:], "://")
		if i < 0 {
			return false
		}
		i += from
		from = i + 3
		if i == 0 || !isSchemeChar(s[i-1]) {
			continue
		}
		// The authority ends at the first /, ?, # or white space; its user
		// information at its last @.
		rest := s[i+3 : min(len(s), i+3+secretWindow)]
		end := strings.IndexAny(rest, "/?# \t\r\n")
		if end < 0 {
			end = len(rest)
		}
		authority := rest[:end]
		from = i + 3 + end // an authority holds no "://"
		at := strings.LastIndexByte(authority, '@')
		if at < 0 || at == len(authority)-1 {
			continue
		}
		_, password, ok := strings.Cut(authority[:at], ":")
		if ok && realPassword(password) {
			return true
		}
	}
	return false
}

func isSchemeChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '.' || c == '-'
}

// placeholderPasswords are the words documentation writes where a password
// goes; a URL holding one of them shows a shape, not a secret.
var placeholderPasswords = []string{
	"password", "passwd", "pass", "pwd", "secret", "redacted",
	"your_password", "your-password", "yourpassword", "mypassword",
}

// realPassword rejects a password that is a placeholder: ${VAR}, $VAR,
// <password>, {{ var }}, %s, [password], a run of one masking character
// (***, xxx, ...), or a documentation word such as "password".
func realPassword(p string) bool {
	switch {
	case p == "":
		return false
	case strings.HasPrefix(p, "$"), strings.HasPrefix(p, "%"), strings.HasPrefix(p, "{{"),
		strings.HasPrefix(p, "<") && strings.HasSuffix(p, ">"),
		strings.HasPrefix(p, "[") && strings.HasSuffix(p, "]"):
		return false
	}
	if r, _ := utf8.DecodeRuneInString(p); strings.ContainsRune("*xX.•", r) && strings.Trim(p, string(r)) == "" {
		return false
	}
	return !contains(placeholderPasswords, strings.ToLower(p))
}
