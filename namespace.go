package memgate

// Namespace names one tenant's store. A value of this type has been checked
// by ParseNamespace: [a-z0-9_-]{1,64}, so it is safe as a folder name.
type Namespace string

// MaxNamespaceLen bounds a namespace name.
const MaxNamespaceLen = 64

// DefaultNamespace is the namespace of the fixed strategy unless configured.
const DefaultNamespace Namespace = "default"

// ParseNamespace checks s and returns it as a Namespace.
func ParseNamespace(field, s string) (Namespace, error) {
	if s == "" || len(s) > MaxNamespaceLen {
		return "", Invalid(field, "a namespace must be 1 to %d characters of a-z, 0-9, _ and -", MaxNamespaceLen)
	}
	for i := 0; i < len(s); i++ {
		if !namespaceByte(s[i]) {
			return "", Invalid(field, "a namespace must be 1 to %d characters of a-z, 0-9, _ and -", MaxNamespaceLen)
		}
	}
	return Namespace(s), nil
}

// NamespaceSchema states ParseNamespace's rule.
func NamespaceSchema() Schema {
	return Schema{Type: "string", MinLength: 1, MaxLength: MaxNamespaceLen, Pattern: NamespacePattern}
}

func namespaceByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// SanitizeNamespace lowers s and replaces every character outside the
// namespace set with '-', cut to at most max bytes. It may return "".
func SanitizeNamespace(s string, max int) string {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if len(out) >= max {
			break
		}
		switch {
		case 'A' <= r && r <= 'Z':
			out = append(out, byte(r-'A'+'a'))
		case r < 0x80 && namespaceByte(byte(r)):
			out = append(out, byte(r))
		default:
			out = append(out, '-')
		}
	}
	return string(out)
}
