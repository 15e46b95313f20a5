package memgate

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends m as JSON: the same bytes as encoding/json writes with
// HTML escaping off, several times faster. A list page or a search answer
// encodes up to a thousand memories; this is most of what it costs.
func (m Memory) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	dst = m.appendFields(dst)
	return append(dst, '}')
}

// AppendJSON appends h as JSON, as Memory.AppendJSON does.
func (h Hit) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	dst = h.appendFields(dst)
	dst = append(dst, `,"score":`...)
	dst = appendFloat(dst, h.Score)
	dst = append(dst, `,"lexical_score":`...)
	dst = appendFloat(dst, h.LexicalScore)
	if h.SemanticScore != nil {
		dst = append(dst, `,"semantic_score":`...)
		dst = appendFloat(dst, *h.SemanticScore)
	}
	return append(dst, '}')
}

// AppendJSON appends r as JSON, as Memory.AppendJSON does: a search answer
// is written whole by hand, and its receipt is part of it.
func (r Receipt) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"retrieval_mode":`...)
	dst = appendString(dst, r.RetrievalMode)
	if r.EmbeddingModel != "" {
		dst = append(dst, `,"embedding_model":`...)
		dst = appendString(dst, r.EmbeddingModel)
	}
	if r.EmbeddingVersion != "" {
		dst = append(dst, `,"embedding_version":`...)
		dst = appendString(dst, r.EmbeddingVersion)
	}
	if r.SemanticFallback != "" {
		dst = append(dst, `,"semantic_fallback":`...)
		dst = appendString(dst, r.SemanticFallback)
	}
	dst = append(dst, `,"candidates":`...)
	dst = strconv.AppendInt(dst, int64(r.Candidates), 10)
	if r.Truncated {
		dst = append(dst, `,"truncated":true`...)
	}
	if len(r.Namespaces) > 0 {
		dst = append(dst, `,"namespaces":[`...)
		for i, ns := range r.Namespaces {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, ns)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// appendFields appends m's fields, without the braces around them.
func (m Memory) appendFields(dst []byte) []byte {
	dst = append(dst, `"id":`...)
	dst = appendString(dst, m.ID)
	dst = append(dst, `,"text":`...)
	dst = appendString(dst, m.Text)
	dst = append(dst, `,"bytes":`...)
	dst = strconv.AppendInt(dst, int64(m.Bytes), 10)
	if m.Title != "" {
		dst = append(dst, `,"title":`...)
		dst = appendString(dst, m.Title)
	}
	dst = append(dst, `,"tags":`...)
	if m.Tags == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, t := range m.Tags {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, t)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"metadata":`...)
	dst = appendMetadata(dst, m.Metadata)
	dst = append(dst, `,"created_at":`...)
	dst = appendTime(dst, m.CreatedAt)
	dst = append(dst, `,"updated_at":`...)
	dst = appendTime(dst, m.UpdatedAt)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, m.Version, 10)
	if m.ExpiresAt != nil {
		dst = append(dst, `,"expires_at":`...)
		dst = appendTime(dst, *m.ExpiresAt)
	}
	if m.Source != nil {
		dst = append(dst, `,"source":{"kind":`...)
		dst = appendString(dst, m.Source.Kind)
		dst = append(dst, `,"reference":`...)
		dst = appendString(dst, m.Source.Reference)
		dst = append(dst, `,"actor":`...)
		dst = appendString(dst, m.Source.Actor)
		if m.Source.ObservedAt != nil {
			dst = append(dst, `,"observed_at":`...)
			dst = appendTime(dst, *m.Source.ObservedAt)
		}
		dst = append(dst, '}')
	}
	if m.Namespace != "" {
		dst = append(dst, `,"namespace":`...)
		dst = appendString(dst, m.Namespace)
	}
	return dst
}

// appendMetadata writes the flat values a memory's metadata holds by hand,
// keys sorted as encoding/json sorts them; any other value goes through
// encoding/json.
func appendMetadata(dst []byte, md map[string]any) []byte {
	if md == nil {
		return append(dst, "null"...)
	}
	keys := make([]string, 0, len(md))
	for k, v := range md {
		switch v := v.(type) {
		case string, bool, nil:
		case float64:
			if math.IsInf(v, 0) || math.IsNaN(v) {
				return appendEncoded(dst, md)
			}
		default:
			return appendEncoded(dst, md)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		switch v := md[k].(type) {
		case string:
			dst = appendString(dst, v)
		case bool:
			dst = strconv.AppendBool(dst, v)
		case nil:
			dst = append(dst, "null"...)
		case float64:
			dst = appendFloat(dst, v)
		}
	}
	return append(dst, '}')
}

// appendEncoded appends v as encoding/json writes it with HTML escaping
// off; a value it cannot write (not one a memory holds) becomes null.
func appendEncoded(dst []byte, v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return append(dst, "null"...)
	}
	return append(dst, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...)
}

// appendTime writes t as time.Time's MarshalJSON does for the years a
// memory can have (1970 to 2262).
func appendTime(dst []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		return appendEncoded(dst, t)
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

// appendFloat writes f as encoding/json does: like %g, with ES6's exponent
// cutoffs, and the exponent not padded.
func appendFloat(dst []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return append(dst, "null"...) // never a score or a metadata value
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string as encoding/json does with HTML
// escaping off: the short escapes, \u00XX for other control characters,
// U+2028 and U+2029 escaped, invalid UTF-8 as \ufffd.
func appendString(dst []byte, s string) []byte { return appendJSONString(dst, s, false) }

// AppendHTMLString writes s as a JSON string as json.Marshal does, HTML
// escaping on: as appendString, and < > & as \u00XX.
func AppendHTMLString(dst []byte, s string) []byte { return appendJSONString(dst, s, true) }

// plainBytes and plainHTMLBytes are the ASCII bytes a JSON string writes as
// themselves, without and with HTML escaping.
var plainBytes, plainHTMLBytes = func() (plain, plainHTML [utf8.RuneSelf]bool) {
	for b := range utf8.RuneSelf {
		plain[b] = b >= 0x20 && b != '"' && b != '\\'
		plainHTML[b] = plain[b] && b != '<' && b != '>' && b != '&'
	}
	return plain, plainHTML
}()

func appendJSONString(dst []byte, s string, html bool) []byte {
	safe := &plainBytes
	if html {
		safe = &plainHTMLBytes
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if safe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
