package corpus

import (
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/memgate/memgate"
)

// The datasets tests read the installed npm packages once per test binary.
var (
	loadedGlosses []Gloss
	loadedHam     map[string][]string
)

func needData(t *testing.T) string {
	t.Helper()
	if !Available() {
		if os.Getenv("CI") == "true" {
			t.Fatalf("datasets not installed in %s: make unit installs them (bench/datasets.sh)", Dir())
		}
		t.Skipf("datasets not installed in %s; run bench/datasets.sh", Dir())
	}
	return Dir()
}

func glosses(t *testing.T) []Gloss {
	t.Helper()
	dir := needData(t)
	if loadedGlosses == nil {
		gs, err := WordNet(dir)
		if err != nil {
			t.Fatal(err)
		}
		loadedGlosses = gs
	}
	return loadedGlosses
}

func ham(t *testing.T) map[string][]string {
	t.Helper()
	dir := needData(t)
	if loadedHam == nil {
		h, err := Ham(dir)
		if err != nil {
			t.Fatal(err)
		}
		loadedHam = h
	}
	return loadedHam
}

func meanText(ws []memgate.Write) float64 {
	sum := 0
	for _, w := range ws {
		sum += len(w.Text)
	}
	return float64(sum) / float64(len(ws))
}

func TestWordNetHasEveryGlossOfWordNet31(t *testing.T) {
	gs := glosses(t)
	if len(gs) < 115_000 || len(gs) > 120_000 {
		t.Fatalf("%d glosses, want about 117,791", len(gs))
	}
	perPOS := map[string]int{}
	lexes := map[string]bool{}
	sum := 0
	for _, g := range gs {
		perPOS[g.POS]++
		lexes[g.Lex] = true
		sum += len(g.Text)
		if g.Text == "" || len(g.Words) == 0 || strings.Contains(g.Words[0], "_") {
			t.Fatalf("bad gloss %+v", g)
		}
	}
	mean := float64(sum) / float64(len(gs))
	if mean < 70 || mean > 110 {
		t.Errorf("mean gloss length %.1f B, want 70..110", mean)
	}
	if len(perPOS) != 4 || perPOS["noun"] < 80_000 || perPOS["adv"] < 3_000 {
		t.Errorf("glosses per part of speech %v", perPOS)
	}
	if len(lexes) < 40 || len(lexes) > 45 {
		t.Errorf("%d lexicographer files, want 45", len(lexes))
	}
	first := gs[0]
	if first.Words[0] != "entity" || first.POS != "noun" || first.Lex != "lex03" ||
		!strings.HasPrefix(first.Text, "that which is perceived") {
		t.Errorf("first gloss %+v, want entity (noun, lex03)", first)
	}
	t.Logf("%d glosses, mean %.1f B, %v, %d lexicographer files", len(gs), mean, perPOS, len(lexes))
}

func TestMemoriesPairGlossesIntoAbout176Bytes(t *testing.T) {
	gs := glosses(t)
	mems := Memories(gs, 100_000, 1)
	if len(mems) != 100_000 {
		t.Fatalf("%d memories, want 100,000", len(mems))
	}
	mean := meanText(mems)
	if mean < 150 || mean > 200 {
		t.Errorf("mean memory length %.1f B, want 150..200", mean)
	}
	texts := map[string]bool{}
	for i, m := range mems {
		if m.ID != "" || len(m.Tags) != 2 || m.Metadata["pos"] != m.Tags[0] || m.Metadata["lex"] != m.Tags[1] {
			t.Fatalf("memory %d: %+v", i, m)
		}
		if _, err := m.Normalize(0); err != nil {
			t.Fatalf("memory %d is not a valid write: %v", i, err)
		}
		texts[m.Text] = true
	}
	if len(texts) < len(mems)*99/100 {
		t.Errorf("only %d distinct texts among %d memories", len(texts), len(mems))
	}
	t.Logf("%d memories, mean %.1f B", len(mems), mean)
}

func TestMemoriesAreDeterministicForASeed(t *testing.T) {
	gs := glosses(t)
	before := slices.Clone(gs)
	a, b := Memories(gs, 5000, 42), Memories(gs, 5000, 42)
	if !reflect.DeepEqual(a, b) {
		t.Error("the same seed gave different memories")
	}
	if c := Memories(gs, 5000, 43); reflect.DeepEqual(a, c) {
		t.Error("another seed gave the same memories")
	}
	if !reflect.DeepEqual(before, gs) {
		t.Error("Memories changed the glosses it was given")
	}
}

func TestKnownItemWordsOccurInTheTarget(t *testing.T) {
	mems := Memories(glosses(t), 100_000, 7)
	for _, words := range []int{1, 3} {
		qs := KnownItem(mems, words, 1000, 9)
		if len(qs) != 1000 {
			t.Fatalf("q%d: %d queries, want 1000", words, len(qs))
		}
		if !reflect.DeepEqual(qs, KnownItem(mems, words, 1000, 9)) {
			t.Errorf("q%d: the same seed gave different queries", words)
		}
		targets := map[int]bool{}
		for _, q := range qs {
			checkKnownItem(t, mems, q, words)
			targets[q.Target] = true
		}
		if len(targets) < 990 {
			t.Errorf("q%d: only %d distinct targets in 1000 queries", words, len(targets))
		}
	}
}

func checkKnownItem(t *testing.T, mems []memgate.Write, q Query, words int) {
	t.Helper()
	if q.Target < 0 || q.Target >= len(mems) {
		t.Fatalf("query %q: target %d out of range", q.Text, q.Target)
	}
	m := mems[q.Target]
	ws := strings.Fields(q.Text)
	if len(ws) != words {
		t.Fatalf("query %q has %d words, want %d", q.Text, len(ws), words)
	}
	have := map[string]bool{}
	for _, f := range strings.Fields(strings.ToLower(m.Text)) {
		have[strings.TrimFunc(f, isPunct)] = true
	}
	seen := map[string]bool{}
	for _, w := range ws {
		if !have[w] || seen[w] || len(w) <= 3 || stopWords[w] {
			t.Fatalf("query %q: word %q is not a distinct content word of %q", q.Text, w, m.Text)
		}
		seen[w] = true
	}
	if !reflect.DeepEqual(q.Tags, m.Tags) || !reflect.DeepEqual(q.Filter, m.Metadata) {
		t.Fatalf("query %q: tags %v filter %v, target has %v %v", q.Text, q.Tags, q.Filter, m.Tags, m.Metadata)
	}
}

func TestNoHitWordsAppearNowhere(t *testing.T) {
	mems := Memories(glosses(t), 100_000, 1)
	words := map[string]bool{}
	for _, m := range mems {
		for _, f := range strings.Fields(strings.ToLower(m.Text)) {
			words[strings.TrimFunc(f, isPunct)] = true
		}
	}
	for _, ps := range ham(t) {
		for _, p := range ps {
			for _, f := range strings.Fields(strings.ToLower(p)) {
				words[strings.TrimFunc(f, isPunct)] = true
			}
		}
	}
	for _, q := range NoHit(1000, 3) {
		for _, w := range strings.Fields(q.Text) {
			if words[w] {
				t.Fatalf("no-hit word %q occurs in the corpus", w)
			}
		}
	}
}

func TestHamGroupsParagraphsByList(t *testing.T) {
	h := ham(t)
	total, sum := 0, 0
	var biggest string
	for name, ps := range h {
		if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
			t.Errorf("list name %q", name)
		}
		if len(ps) > len(h[biggest]) {
			biggest = name
		}
		for _, p := range ps {
			total++
			sum += len(p)
			switch {
			case len(p) < MinParagraph || len(p) > MaxParagraph:
				t.Fatalf("%s: paragraph of %d bytes", name, len(p))
			case !utf8.ValidString(p):
				t.Fatalf("%s: paragraph is not UTF-8: %q", name, p)
			case strings.HasPrefix(p, ">") || strings.Contains(p, "\n>"):
				t.Fatalf("%s: paragraph holds a quote: %q", name, p)
			case strings.Contains(strings.ToLower(p), "<html") || mostlyHeaders(p):
				t.Fatalf("%s: paragraph holds HTML or mail headers: %q", name, p)
			}
		}
	}
	mean := float64(sum) / float64(total)
	if total < 10_000 || len(h) < 20 || biggest != "fork" || mean < 150 || mean > 400 {
		t.Errorf("%d paragraphs (mean %.0f B) in %d lists, biggest %s; want >10k, 150..400 B, >20 lists, fork",
			total, mean, len(h), biggest)
	}
	t.Logf("%d paragraphs, mean %.0f B, %d lists", total, mean, len(h))
	for _, l := range []string{"fork", "ilug", "razor-users", "spamassassin-talk", "misc"} {
		t.Logf("  %-18s %5d", l, len(h[l]))
	}
	mems := HamWrites(h, 15_000, 5)
	if len(mems) != 15_000 || !reflect.DeepEqual(mems, HamWrites(h, 15_000, 5)) {
		t.Fatalf("HamWrites gave %d memories or differs between calls", len(mems))
	}
	for i, m := range mems {
		if _, err := m.Normalize(0); err != nil {
			t.Fatalf("ham memory %d is not a valid write: %v", i, err)
		}
	}
	for _, q := range KnownItem(mems, 3, 500, 11) {
		checkKnownItem(t, mems, q, 3)
	}
}

func mostlyHeaders(p string) bool {
	lines := strings.Split(p, "\n")
	n := 0
	for _, l := range lines {
		if headerLine.MatchString(l) {
			n++
		}
	}
	return n*2 >= len(lines)
}

// data.noun as it begins: the license header, then synsets.
const sampleNoun = `  1 This software and database is being provided to you, the LICENSEE, by  
  2 Princeton University under the following license.  
00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 ~ 00002137 n 0000 ~ 04431553 n 0000 | that which is perceived or known or inferred to have its own distinct existence (living or nonliving)  
00002137 03 n 02 abstraction 0 abstract_entity 0 010 @ 00001740 n 0000 + 00694095 v 0101 | a general concept formed by extracting common features from specific examples  
00002312 00 s 02 abaxial 0 dorsal 4 002 ;c 06047178 n 0000 ! 00002527 a 0101 | facing away from the axis of an organ or organism; "the abaxial surface of a leaf"  
00005002 02 r 01 galore(ip) 0 000 | in great numbers  
`

func TestParseDataReadsSynsets(t *testing.T) {
	gs, err := parseData(strings.NewReader(sampleNoun))
	if err != nil {
		t.Fatal(err)
	}
	want := []Gloss{
		{Text: "that which is perceived or known or inferred to have its own distinct existence (living or nonliving)",
			Words: []string{"entity"}, POS: "noun", Lex: "lex03"},
		{Text: "a general concept formed by extracting common features from specific examples",
			Words: []string{"abstraction", "abstract entity"}, POS: "noun", Lex: "lex03"},
		{Text: `facing away from the axis of an organ or organism; "the abaxial surface of a leaf"`,
			Words: []string{"abaxial", "dorsal"}, POS: "adj", Lex: "lex00"},
		{Text: "in great numbers", Words: []string{"galore"}, POS: "adv", Lex: "lex02"},
	}
	if !reflect.DeepEqual(gs, want) {
		t.Errorf("got  %+v\nwant %+v", gs, want)
	}
}

func TestParseDataRejectsBrokenLines(t *testing.T) {
	for name, line := range map[string]string{
		"too few fields":           "00001740 03 n | gloss",
		"word count too high":      "00001740 03 n 05 entity 0 | gloss",
		"unknown ss_type":          "00001740 03 x 01 entity 0 000 | gloss",
		"lex_filenum not a number": "00001740 zz n 01 entity 0 000 | gloss",
	} {
		if _, err := parseData(strings.NewReader(line + "\n")); err == nil {
			t.Errorf("%s: no error for %q", name, line)
		}
	}
}

func TestMemoriesPairTheShuffledGlosses(t *testing.T) {
	var gs []Gloss
	for i := range 50 {
		gs = append(gs, Gloss{Text: strings.Repeat("x", i+1), POS: "noun", Lex: "lex05"})
	}
	mems := Memories(gs, 100, 1)
	if len(mems) != 50 {
		t.Fatalf("%d memories from 50 glosses, want 50 (capped)", len(mems))
	}
	for i, m := range mems {
		a, b, ok := strings.Cut(m.Text, " ")
		if !ok || a == b || !reflect.DeepEqual(m.Tags, []string{"noun", "lex05"}) {
			t.Fatalf("memory %d: %+v", i, m)
		}
	}
	if Memories(gs, 0, 1) != nil || Memories(nil, 10, 1) != nil {
		t.Error("no memories asked or no glosses should give nil")
	}
}

func TestContentWordsSkipsStopWordsAndGluedWords(t *testing.T) {
	got := ContentWords(`The Quick, "brown" fox's www.linux.ie know-how: quick! (jumping) over 2002 them.`)
	want := []string{"quick", "brown", "jumping"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestNoHitIsDeterministic(t *testing.T) {
	a := NoHit(20, 1)
	if !reflect.DeepEqual(a, NoHit(20, 1)) || reflect.DeepEqual(a, NoHit(20, 2)) {
		t.Error("NoHit does not depend on its seed alone")
	}
	for _, q := range a {
		if q.Target != -1 || len(strings.Fields(q.Text)) != 3 || strings.ContainsAny(q.Text, "aeiouy") {
			t.Fatalf("no-hit query %+v", q)
		}
	}
}

func TestMetrics(t *testing.T) {
	tests := []struct {
		name  string
		ranks []int
		mrr   float64
		at5   float64
	}{
		{"no queries score zero", nil, 0, 0},
		{"first hits score one", []int{1, 1}, 1, 1},
		{"misses score zero", []int{0, 0}, 0, 0},
		{"ranks average their reciprocals", []int{1, 2, 4, 0}, (1 + 0.5 + 0.25) / 4, 0.75},
		{"rank six misses success at five", []int{5, 6}, (0.2 + 1.0/6) / 2, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MRR(tt.ranks); math.Abs(got-tt.mrr) > 1e-12 {
				t.Errorf("MRR(%v) = %v, want %v", tt.ranks, got, tt.mrr)
			}
			if got := SuccessRate(5, tt.ranks); got != tt.at5 {
				t.Errorf("SuccessRate(5, %v) = %v, want %v", tt.ranks, got, tt.at5)
			}
		})
	}
	if SuccessAt(5, 0) || !SuccessAt(5, 5) || SuccessAt(5, 6) || !SuccessAt(1, 1) {
		t.Error("SuccessAt is wrong at a boundary")
	}
	if Rank([]string{"a", "b"}, "b") != 2 || Rank([]string{"a"}, "z") != 0 || Rank(nil, "") != 0 {
		t.Error("Rank is wrong")
	}
}

func TestHamMailKeepsOnlyTheAuthorsPlainText(t *testing.T) {
	raw := "From fork-admin@xent.com  Thu Aug 22 12:36:23 2002\n" +
		"Subject: Re: [FoRK] something\n" +
		"List-Id: Friends of Rohit Khare\n <fork.xent.com>\n" +
		"Content-Type: multipart/alternative; boundary=\"XX\"\n\n" +
		"--XX\nContent-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: quoted-printable\n\n" +
		"On Thu, 22 Aug 2002, Bob <bob@example.org>\nwrote:\n> quoted text that must go away, really it must\n\n" +
		"This paragraph is the author's own text, and caf=E9 stays in it.\n\n" +
		"short\n\n" +
		"-- \nBob's signature, which is long enough to count as a paragraph.\n" +
		"--XX\nContent-Type: text/html\n\n<html><body><p>This is the HTML copy of the same text.</p></body></html>\n" +
		"--XX--\n"
	list, paras := hamMail(raw)
	want := []string{"This paragraph is the author's own text, and café stays in it."}
	if list != "fork" || !reflect.DeepEqual(paras, want) {
		t.Errorf("got %q %q, want fork %q", list, paras, want)
	}
}

func TestListName(t *testing.T) {
	tests := []struct {
		name   string
		header map[string]string
		want   string
	}{
		{"List-Id comes first", map[string]string{"list-id": "Irish Linux Users' Group <ilug.linux.ie>", "subject": "[other] x"}, "ilug"},
		{"List-Post gives the list address", map[string]string{"list-post": "<mailto:Razor-Users@example.sourceforge.net>"}, "razor-users"},
		{"a list's admin Sender counts", map[string]string{"sender": "fork-admin@xent.com"}, "fork"},
		{"a person's Sender does not", map[string]string{"sender": "Bob <bob@example.org>", "subject": "hi"}, "misc"},
		{"a Subject tag after Re: counts", map[string]string{"subject": "Re: [Use Perl] stories"}, "use-perl"},
		{"no list is misc", map[string]string{}, "misc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := listName(tt.header); got != tt.want {
				t.Errorf("listName(%v) = %q, want %q", tt.header, got, tt.want)
			}
		})
	}
}

func FuzzParseData(f *testing.F) {
	for line := range strings.SplitSeq(sampleNoun, "\n") {
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, line string) {
		gs, err := parseData(strings.NewReader(line))
		if err != nil && gs != nil {
			t.Errorf("glosses %v with error %v", gs, err)
		}
	})
}

func FuzzHamMail(f *testing.F) {
	f.Add("Subject: [x] y\nContent-Type: multipart/mixed; boundary=b\n\n--b\n\nsome text that is long enough to be a paragraph of its own\n--b--\n")
	f.Add("Content-Transfer-Encoding: base64\n\naGVsbG8gd29ybGQ=\n")
	f.Fuzz(func(t *testing.T, raw string) {
		_, paras := hamMail(raw)
		for _, p := range paras {
			if !utf8.ValidString(p) || len(p) < MinParagraph || len(p) > MaxParagraph {
				t.Errorf("paragraph %q", p)
			}
		}
	})
}

func TestFirstSensesAreTheMostFrequentSynsets(t *testing.T) {
	first, err := FirstSenses(needData(t))
	if err != nil {
		t.Fatal(err)
	}
	for lemma, want := range map[string]string{"car": "automobile", "doctor": "physician", "vacation": "holiday", "transition": "passage"} {
		if !slices.Contains(first[lemma], want) {
			t.Errorf("first sense of %q = %q, want it to hold %q", lemma, first[lemma], want)
		}
	}
	if slices.Contains(first["car"], "car") {
		t.Errorf("a lemma is not its own synonym: %q", first["car"])
	}
	if _, ok := first["motor_vehicle"]; ok {
		t.Error("collocations are left out")
	}
}
