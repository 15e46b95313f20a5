package server

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// Credentials made up for these tests, in the shapes their issuers use.
var (
	fakeRSA = "-----BEGIN RSA PRIVATE KEY-----\n" +
		"MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi6yJd7bkTzYpAaQxLkTw4sA9eP\n" +
		"kq2Wv0S8v6bqYQ1fR6JqvYwqB1nWm8r3hYk0b1mQJzTq4E5vX2nG8sN9pL3dK7cF\n" +
		"-----END RSA PRIVATE KEY-----\n"
	fakeOpenSSH = "-----BEGIN OPENSSH PRIVATE KEY-----\r\n" +
		"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\r\n" +
		"-----END OPENSSH PRIVATE KEY-----"
	fakeEncryptedPEM = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n" +
		"DEK-Info: AES-128-CBC,3F17F5316E2BAC89\n\n" +
		"hQ7iNqP9b3tVw3l0eX6hF0n2yq9Jm0rWbq3mZc5tQe2xL1vR8aK4dS7uY6iO9pA0\n-----END RSA PRIVATE KEY-----"
	fakePGP = "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\n" +
		"lQOYBFk3kVQBCADKq8z9d7tPq2mYv0qB1nWm8r3hYk0b1mQJzTq4E5vX2nG8sN9p\n-----END PGP PRIVATE KEY BLOCK-----"
	fakeJWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ" +
		".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
	fakeGitHub = "ghp_" + strings.Repeat("aB3d", 9)
)

func TestDetectSecret(t *testing.T) {
	for _, tc := range []struct {
		name, text, kind string
	}{
		// Secrets.
		{"an RSA key block", "key:\n" + fakeRSA, SecretPrivateKey},
		{"an OpenSSH key block with CRLF", fakeOpenSSH, SecretPrivateKey},
		{"an encrypted PEM key with headers", fakeEncryptedPEM, SecretPrivateKey},
		{"a PGP private key block", fakePGP, SecretPrivateKey},
		{"a key in a JSON service-account file", `{"type":"service_account","private_key":"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n"}`, SecretPrivateKey},
		{"a key block on one line", "-----BEGIN PRIVATE KEY----- MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7 -----END PRIVATE KEY-----", SecretPrivateKey},
		{"a key block with a short body", "-----BEGIN EC PRIVATE KEY-----\nMHcC\n-----END EC PRIVATE KEY-----", SecretPrivateKey},
		{"an AWS access key id", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE", SecretAWSAccessKey},
		{"an AWS session key id", `"ASIAY34FZKBOKMUTVV7A"`, SecretAWSAccessKey},
		{"a Google API key", "maps key AIzaSyA1234567890abcdefghijklmnopqrstuv.", SecretGoogleAPIKey},
		{"a GitHub personal token", "token " + fakeGitHub, SecretGitHubToken},
		{"a GitHub OAuth token", "gho_" + strings.Repeat("Zz09", 9), SecretGitHubToken},
		{"a GitHub user-to-server token", "ghu_" + strings.Repeat("Zz09", 9), SecretGitHubToken},
		{"a GitHub server-to-server token", "x=ghs_" + strings.Repeat("Zz09", 9), SecretGitHubToken},
		{"a GitHub refresh token", "ghr_" + strings.Repeat("Zz09", 9), SecretGitHubToken},
		{"a GitHub fine-grained token", "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijk", SecretGitHubToken},
		{"a GitLab token", "glpat-AbCdEfGhIjKlMnOpQrSt", SecretGitLabToken},
		{"a Slack bot token", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", SecretSlackToken},
		{"a Slack user token", "SLACK=xoxp-1234-5678-9012-abcdef", SecretSlackToken},
		{"a Stripe secret key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", SecretStripeKey},
		{"a Stripe restricted key", "rk_live_51H8xYZAbCdEfGh12345", SecretStripeKey},
		{"an Anthropic key", "ANTHROPIC_API_KEY=sk-ant-api03-AbCdEf0123456789_GhIjKlMnOp-QrStUv", SecretAnthropicKey},
		{"an OpenAI project key", "sk-proj-AbC123dEf456GhI789jKl012MnO345", SecretOpenAIKey},
		{"an OpenAI legacy key", "sk-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKl", SecretOpenAIKey},
		{"a JWT", "Authorization: Bearer " + fakeJWT, SecretJWT},
		{"a password in a database URL", "postgres://app:s3cr3t-Pa55@db.internal:5432/app", SecretURLPassword},
		{"a password in an HTTPS URL", "see https://bob:hunter2@example.com/x", SecretURLPassword},
		{"a password without a user", "redis://:p4ssw0rd@cache:6379/0", SecretURLPassword},

		// Not secrets.
		{"a placeholder", "export OPENAI_API_KEY=${OPENAI_API_KEY}", ""},
		{"a bearer placeholder", "Authorization: Bearer ${TOKEN}", ""},
		{"a SHA-256 hash", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", ""},
		{"a SHA-1 commit", "commit da39a3ee5e6b4b0d3255bfef95601890afd80709", ""},
		{"a UUID", "id 123e4567-e89b-12d3-a456-426614174000", ""},
		{"code reading a key from the environment", `key := os.Getenv("AWS_ACCESS_KEY_ID")`, ""},
		{"code checking a token prefix", `if strings.HasPrefix(tok, "ghp_") || strings.HasPrefix(tok, "sk-") {`, ""},
		{"code matching a PEM armour line", `if bytes.HasPrefix(b, []byte("-----BEGIN PRIVATE KEY-----")) {`, ""},
		{"code building a PEM block", `pem := "-----BEGIN PRIVATE KEY-----\n" + body + "\n-----END"`, ""},
		{"a public key", "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA3Tz2mr7SZiAMfQyuvBjM\n-----END PUBLIC KEY-----", ""},
		{"a certificate", "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n-----END CERTIFICATE-----", ""},
		{"a kebab-case word after sk-", "use the sk-learn-compatible-estimator-interface-v2 adapter", ""},
		{"a word starting with AKIA", "The AKIA prefix marks AWS access keys; AKIAX is short.", ""},
		{"an unsigned JWT", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", ""},
		{"a URL with the word password", "postgres://user:password@localhost/db", ""},
		{"a URL with a variable", "postgres://user:${DB_PASSWORD}@db/app", ""},
		{"a URL with an angle placeholder", "https://user:<password>@host/path", ""},
		{"a URL with a masked password", "mysql://root:****@localhost", ""},
		{"a URL with a port", "https://example.com:8443/path?q=a@b", ""},
		{"an SSH remote", "git@github.com:org/repo.git and ssh://git@github.com/org/repo", ""},
		{"a Slack-like word without digits", "xoxo-hugs-and-kisses-forever", ""},
		{"an email address", "write to ana@example.com", ""},
		{"base64 image data", "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==", ""},
		{"a token body inside a longer word", "xghp_" + strings.Repeat("aB3d", 9), ""},
		{"a live-looking Stripe test key", "sk_test_4eC39HqLyjWDarjtT1zdp7dc", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := detectSecret(tc.text); got != tc.kind {
				t.Fatalf("detectSecret = %q, want %q", got, tc.kind)
			}
		})
	}
}

func TestSecretErrorNeverEchoesTheValue(t *testing.T) {
	err := secretError("text", SecretGitHubToken)
	if strings.Contains(err.Error(), "ghp_") || !strings.Contains(err.Error(), "github token") {
		t.Fatalf("message: %v", err)
	}
}

func BenchmarkDetectSecretOrdinaryText(b *testing.B) {
	text := strings.Repeat("An ordinary note about storage engines, with code like x := a[i] and a URL https://example.com/x. ", 600)
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if detectSecret(text) != "" {
			b.Fatal("false positive")
		}
	}
}

// keyBlockExpression is the expression the key-block check once was; the
// hand-written check must agree with it.
var keyBlockExpression = regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----` +
	`(?:(?:[ \t\r\n]|\\[rn])+(?:[A-Za-z-]+:[^\n\\]*(?:\n|\\n))*(?:(?:[ \t\r\n]|\\[rn])*[A-Za-z0-9+/=]){16}` +
	`|[\s\S]{0,900}?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----)`)

// The key-block check agrees with the expression on texts made of the
// pieces of key blocks, near misses and filler.
func TestPrivateKeyMatchesTheExpression(t *testing.T) {
	pieces := []string{
		"-----BEGIN PRIVATE KEY-----", "-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN PGP PRIVATE KEY BLOCK-----",
		"-----BEGIN PUBLIC KEY-----", "-----BEGIN  PRIVATE KEY-----", "-----BEGIN rsa PRIVATE KEY-----",
		"-----END PRIVATE KEY-----", "-----END EC PRIVATE KEY-----", "-----END CERTIFICATE-----", "-----END ",
		"\n", " ", "\t", `\n`, `\r`, "\r\n", "Proc-Type: 4,ENCRYPTED\n", "DEK-Info: AES\\n", "Version: x\n",
		"MIIEvQIBADANBg", "kqhkiG9w0BAQEF", "abc", "+/=", "-", ":", "word ", strings.Repeat("x", 300),
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for n := range 20000 {
		var sb strings.Builder
		for range 1 + rng.IntN(12) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		text := sb.String()
		if got, want := privateKey(text), keyBlockExpression.MatchString(text); got != want {
			t.Fatalf("text %d %q: %v, the expression says %v", n, text, got, want)
		}
	}
}

// The check stays linear on text made of armour lines and near misses:
// each byte read a bounded number of times (BenchmarkDetectSecretNearMiss
// has the figure).
func TestPrivateKeyNearMisses(t *testing.T) {
	for _, unit := range []string{"-----BEGIN PRIVATE KEY-----\nA:", "-----BEGIN PRIVATE KEY-----\n", "-----BEGIN PRIVATE KEY-----\n-----END "} {
		text := strings.Repeat(unit, (64<<10)/len(unit))
		if kind := detectSecret(text); kind != "" {
			t.Fatalf("%q repeated: %s", unit, kind)
		}
	}
}

// BenchmarkDetectSecretNearMiss is 64 KiB of armour lines that never become
// a key.
func BenchmarkDetectSecretNearMiss(b *testing.B) {
	text := strings.Repeat("-----BEGIN PRIVATE KEY-----\nA:", (64<<10)/30)
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if detectSecret(text) != "" {
			b.Fatal("false positive")
		}
	}
}
