package memgate

import "unicode/utf8"

// ValidJSONText reports whether every byte of the JSON text b is valid
// UTF-8 and every \u escape of a surrogate (\ud800–\udfff) is one half of a
// pair: a high surrogate followed at once by a low one. Go's decoder turns
// both kinds of fault into U+FFFD without a word, so two different strings
// sent would become one stored; input from outside is checked with this
// before it is decoded, and refused instead. b need not be valid JSON: only
// what lies inside its strings is looked at for escapes.
func ValidJSONText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 >= len(b) {
				return true // unterminated: the decoder refuses it
			}
			i++
			if b[i] != 'u' {
				continue
			}
			r, ok := hex4(b, i+1)
			if !ok {
				continue // malformed escape: the decoder refuses it
			}
			i += 4
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return false // a low half without its high half
			case r >= 0xD800 && r <= 0xDBFF:
				// The low half must follow at once: \uDC00–\uDFFF.
				if i+6 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u' {
					return false
				}
				lo, ok := hex4(b, i+3)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return false
				}
				i += 6
			}
		}
	}
	return true
}

// hex4 reads the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
