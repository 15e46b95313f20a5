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

// secretRule recognises one kind of credential. A rule's expression runs only
// when one of its triggers occurs in the text, so ordinary text costs a few
// substring scans and no regular expression.
type secretRule struct {
	kind     string
	triggers []string
	re       *regexp.Regexp
	// ok, when set, rejects a match that is not a credential after all.
	ok func(match string) bool
}

// A token must stand on its own: a character outside the token's alphabet
// (or the edge of the text) comes before it, so a key-shaped run inside a
// longer word does not count.
const edge = `(?:^|[^A-Za-z0-9_-])`

var secretRules = []secretRule{
	// A key block: the armour line and a body of base64, perhaps after
	// "Proc-Type:"-style header lines. The armour line alone, as in code that
	// parses PEM, is not a key.
	{kind: SecretPrivateKey, triggers: []string{"-----BEGIN "},
		re: regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[ \t]*\r?\n` +
			`(?:[A-Za-z-]+:[^\n]*\n)*\s*[A-Za-z0-9+/=\r\n]{40,}`)},
	{kind: SecretAWSAccessKey, triggers: []string{"AKIA", "ASIA"},
		re: regexp.MustCompile(`(?:^|[^A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?:$|[^A-Za-z0-9])`)},
	{kind: SecretGoogleAPIKey, triggers: []string{"AIza"},
		re: regexp.MustCompile(edge + `AIza[0-9A-Za-z_-]{35}(?:$|[^0-9A-Za-z_-])`)},
	{kind: SecretGitHubToken, triggers: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"},
		re: regexp.MustCompile(`(?:^|[^A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{36,255}(?:$|[^A-Za-z0-9_])`)},
	{kind: SecretGitHubToken, triggers: []string{"github_pat_"},
		re: regexp.MustCompile(`(?:^|[^A-Za-z0-9_])github_pat_[A-Za-z0-9_]{36,255}`)},
	{kind: SecretGitLabToken, triggers: []string{"glpat-"},
		re: regexp.MustCompile(edge + `glpat-[A-Za-z0-9_-]{20,}`)},
	{kind: SecretSlackToken, triggers: []string{"xox"},
		re: regexp.MustCompile(edge + `xox[a-z]-[A-Za-z0-9-]{10,}`), ok: hasDigits},
	{kind: SecretStripeKey, triggers: []string{"sk_live_", "rk_live_"},
		re: regexp.MustCompile(edge + `[sr]k_live_[0-9A-Za-z]{10,}`)},
	{kind: SecretAnthropicKey, triggers: []string{"sk-ant-"},
		re: regexp.MustCompile(edge + `sk-ant-[A-Za-z0-9_-]{20,}`)},
	// An OpenAI-style key is "sk-" and a long random body. Kebab-case words
	// such as sk-learn-compatible-estimator are not, so the body must mix
	// upper case, lower case and digits.
	{kind: SecretOpenAIKey, triggers: []string{"sk-"},
		re: regexp.MustCompile(edge + `sk-[A-Za-z0-9_-]{20,}`), ok: randomBody},
	{kind: SecretJWT, triggers: []string{"eyJ"},
		re: regexp.MustCompile(edge + `eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}`)},
	{kind: SecretURLPassword, triggers: []string{"://"},
		re: regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]+:[^\s/?#@]+@[^\s/?#@]`), ok: realPassword},
}

// detectSecret returns the kind of the first secret found in s, or "".
func detectSecret(s string) string {
	for i := range secretRules {
		r := &secretRules[i]
		if !containsAny(s, r.triggers) {
			continue
		}
		if r.ok == nil {
			if r.re.MatchString(s) {
				return r.kind
			}
			continue
		}
		for _, m := range r.re.FindAllString(s, -1) {
			if r.ok(m) {
				return r.kind
			}
		}
	}
	return ""
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func hasDigits(s string) bool { return strings.ContainsAny(s, "0123456789") }

func randomBody(m string) bool {
	_, body, _ := strings.Cut(m, "sk-")
	return strings.ContainsAny(body, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") &&
		strings.ContainsAny(body, "abcdefghijklmnopqrstuvwxyz") &&
		hasDigits(body)
}

// placeholderPasswords are the words documentation writes where a password
// goes; a URL holding one of them shows a shape, not a secret.
var placeholderPasswords = []string{
	"password", "passwd", "pass", "pwd", "secret", "redacted",
	"your_password", "your-password", "yourpassword", "mypassword",
}

// realPassword rejects URL user information whose password is a placeholder:
// ${VAR}, $VAR, <password>, {{ var }}, %s, [password], a run of one masking
// character (***, xxx, ...), or a documentation word such as "password".
func realPassword(m string) bool {
	_, rest, _ := strings.Cut(m, "://")
	userinfo, _, _ := strings.Cut(rest, "@")
	_, p, _ := strings.Cut(userinfo, ":")
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
