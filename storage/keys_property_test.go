package storage

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/memgate/memgate"
)

// Characters of every class a memory may hold: what JSON escapes for HTML,
// quotes and backslashes, controls, the line separators JSON escapes,
// multibyte and 4-byte UTF-8, the replacement character.
var (
	anyChars = []string{"a", "Z", "7", " ", "<", ">", "&", "\"", "\\", "/", "'", "\t", "\n", "\x00", "\x01", "\x7f",
		"é", "ß", "中", "\u2028", "\u2029", "\ufffd", "😀", "𝄞", "𝒜", "\u200d", "=", ":", "{", "}"}
	// Ids and titles refuse control characters.
	printChars = []string{"a", "Z", "7", " ", "<", ">", "&", "\"", "\\", "/", "'", "é", "中", "\u2028", "\ufffd",
		"😀", "𝄞", "=", "{"}
	// Tags: letters, digits and _ - . : /
	tagChars = []string{"a", "Z", "7", "_", "-", ".", ":", "/", "é", "中", "𝒜", "Ω", "٣"}
	keyChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
)

// fillBytes appends characters from chars until b holds n bytes exactly,
// finishing with ASCII when a larger character no longer fits.
func fillBytes(rng *rand.Rand, b *strings.Builder, n int, chars []string) {
	for b.Len() < n {
		c := chars[rng.Intn(len(chars))]
		if b.Len()+len(c) > n {
			c = "a"
		}
		b.WriteString(c)
	}
}

// fillChars appends n characters from chars.
func fillChars(rng *rand.Rand, n int, chars []string) string {
	var b strings.Builder
	for range n {
		b.WriteString(chars[rng.Intn(len(chars))])
	}
	return b.String()
}

// metadataBytes measures metadata as the limit does.
func metadataBytes(t *testing.T, md map[string]any) int {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(md); err != nil {
		t.Fatal(err)
	}
	return buf.Len() - 1
}

// largestMemory is a memory with every field at its limit: an id of
// MaxIDBytes, a title of MaxTitleChars, MaxTags tags of MaxTagChars, and
// MaxMetadataKeys keys of MaxMetadataKeyChars whose values fill
// MaxMetadataBytes exactly, text of DefaultMaxTextBytes.
func largestMemory(t *testing.T, rng *rand.Rand, n int) memgate.Write {
	t.Helper()
	var id strings.Builder
	fmt.Fprintf(&id, "%06d", n)
	fillBytes(rng, &id, memgate.MaxIDBytes, printChars)

	tags := make([]string, 0, memgate.MaxTags)
	for i := range memgate.MaxTags {
		prefix := fmt.Sprintf("%06d.%02d.", n, i)
		tags = append(tags, prefix+fillChars(rng, memgate.MaxTagChars-len(prefix), tagChars))
	}

	md := map[string]any{}
	keys := make([]string, 0, memgate.MaxMetadataKeys)
	for i := range memgate.MaxMetadataKeys {
		k := []byte(fmt.Sprintf("k%02d", i))
		for len(k) < memgate.MaxMetadataKeyChars {
			k = append(k, keyChars[rng.Intn(len(keyChars))])
		}
		keys = append(keys, string(k))
		switch i % 8 {
		case 1:
			md[string(k)] = rng.NormFloat64() * 1e12
		case 2:
			md[string(k)] = i%16 == 2
		case 3:
			md[string(k)] = nil
		default:
			md[string(k)] = ""
		}
	}
	// Grow the string values in turn until the metadata is at its limit.
	strs := []string{}
	for _, k := range keys {
		if _, ok := md[k].(string); ok {
			strs = append(strs, k)
		}
	}
	class := anyChars
	if n%3 == 0 {
		class = []string{"<", ">", "&"} // the worst case for HTML escaping
	}
	// A character costs at most 6 bytes as JSON (\u0001), so adding a sixth
	// of the room left never passes the limit by more than the last step.
	size := metadataBytes(t, md)
	for i := 0; ; i++ {
		k := strs[i%len(strs)]
		v := md[k].(string)
		step := max(1, (memgate.MaxMetadataBytes-size)/6)
		md[k] = v + fillChars(rng, step, class)
		if size = metadataBytes(t, md); size > memgate.MaxMetadataBytes {
			md[k] = v
			break // step was 1: the limit is less than one character away
		}
	}
	for k := strs[0]; metadataBytes(t, md) < memgate.MaxMetadataBytes; {
		md[k] = md[k].(string) + "a"
	}

	var text strings.Builder
	switch n % 4 {
	case 0: // one "word" as long as the text
		fillBytes(rng, &text, memgate.DefaultMaxTextBytes, []string{"a", "é", "中"})
	default:
		fillBytes(rng, &text, memgate.DefaultMaxTextBytes, append(anyChars, "word", "words ", "x", "y"))
	}
	return memgate.Write{ID: id.String(), Title: fillChars(rng, memgate.MaxTitleChars, printChars),
		Tags: tags, Metadata: md, Text: text.String()}
}

// The fields of a generated memory are at their limits, not past them:
// each limit holds at N and refuses N+1.
func TestLargestMemoryIsAtEveryLimit(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for n := range 6 {
		w := largestMemory(t, rng, n)
		if len(w.ID) != memgate.MaxIDBytes || utf8.RuneCountInString(w.Title) != memgate.MaxTitleChars ||
			len(w.Text) != memgate.DefaultMaxTextBytes || len(w.Tags) != memgate.MaxTags ||
			metadataBytes(t, w.Metadata) != memgate.MaxMetadataBytes {
			t.Fatalf("memory %d is not at every limit", n)
		}
		for _, tag := range w.Tags {
			if utf8.RuneCountInString(tag) != memgate.MaxTagChars {
				t.Fatalf("tag of %d characters", utf8.RuneCountInString(tag))
			}
		}
		if _, err := w.Normalize(0); err != nil {
			t.Fatalf("memory %d: %v", n, err)
		}
		over := w
		over.Metadata = map[string]any{}
		for k, v := range w.Metadata {
			over.Metadata[k] = v
		}
		for k, v := range over.Metadata {
			if s, ok := v.(string); ok {
				over.Metadata[k] = s + "a"
				break
			}
		}
		if _, err := over.Normalize(0); err == nil {
			t.Fatal("metadata one byte past the limit was accepted")
		}
		over = w
		over.Text += "a"
		if _, err := over.Normalize(0); err == nil {
			t.Fatal("text one byte past the limit was accepted")
		}
		over = w
		over.ID += "a"
		if _, err := over.Normalize(0); err == nil {
			t.Fatal("an id one byte past the limit was accepted")
		}
	}
}

// The largest legal memories, of every character class, written, replaced
// and deleted across many merges, then read back after a reopen in every
// way: never an error, and each reads as written. Plain and encrypted.
func TestLargestMemoriesProperty(t *testing.T) {
	for _, mode := range []string{"plain", "encrypted"} {
		t.Run(mode, func(t *testing.T) {
			opts, count := Options{NoSync: true, MergeEvery: 3}, 10
			if mode == "encrypted" {
				opts.Encryption = encryption(t, "a passphrase for the largest memories")
				count = 6 // the keys differ, the rest is the same code
			}
			largestMemoriesRoundTrip(t, opts, count)
		})
	}
}

func largestMemoriesRoundTrip(t *testing.T, opts Options, count int) {
	ctx := context.Background()
	defer func(n int) { mergeSlice = n }(mergeSlice)
	mergeSlice = 64 // merges in many slices
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(int64(count)))
	want := map[string]memgate.Write{}
	var ids []string
	for n := range count {
		w := largestMemory(t, rng, n)
		put(t, s, w)
		want[w.ID] = w
		ids = append(ids, w.ID)
	}
	// Replace some, delete some: postings of long terms leave the index.
	for i, id := range ids {
		switch i % 5 {
		case 1:
			w := largestMemory(t, rng, count+i)
			w.ID = id
			put(t, s, w)
			want[id] = w
		case 3:
			if err := s.Delete(ctx, id, nil); err != nil {
				t.Fatal(err)
			}
			delete(want, id)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkFile(t, path)
	if s, err = Open(path, opts); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	checkKeys(t, s)

	for id, w := range want {
		m, err := s.Get(ctx, id)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if m.Text != w.Text || m.Title != w.Title || !reflect.DeepEqual(m.Tags, w.Tags) || !reflect.DeepEqual(m.Metadata, w.Metadata) {
			t.Fatal("a memory does not read as written")
		}
		for k, v := range w.Metadata {
			if vs, ok := v.(string); !ok || len(vs) < 100 {
				continue
			}
			res, err := s.Search(ctx, memgate.Query{Filter: map[string]any{k: v}, Limit: memgate.MaxSearchLimit})
			if err != nil {
				t.Fatalf("search by metadata: %v", err)
			}
			if len(res.Hits) != 1 || res.Hits[0].ID != id {
				t.Fatalf("search by a long metadata value: %d hits", len(res.Hits))
			}
		}
		res, err := s.Search(ctx, memgate.Query{Tags: w.Tags[:2], Limit: memgate.MaxSearchLimit})
		if err != nil || len(res.Hits) != 1 || res.Hits[0].ID != id {
			t.Fatalf("search by tags: %d hits, %v", len(res.Hits), err)
		}
		if _, err := s.Search(ctx, memgate.Query{Text: w.Text[:200], Tags: w.Tags[31:], Limit: memgate.MaxSearchLimit}); err != nil {
			t.Fatalf("search by text: %v", err)
		}
	}
	res, err := s.Search(ctx, memgate.Query{Text: "words", Limit: memgate.MaxSearchLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range res.Hits {
		if _, ok := want[h.ID]; !ok {
			t.Fatal("search found a memory that was deleted or never written")
		}
	}

	listed := 0
	for cursor := ""; ; {
		page, err := s.List(ctx, memgate.ListQuery{Cursor: cursor, Limit: 7})
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		listed += len(page.Memories)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if listed != len(want) {
		t.Fatalf("list: %d memories, want %d", listed, len(want))
	}

	var exp bytes.Buffer
	if n, _, err := s.Export(ctx, &exp, "", 0); err != nil || n != len(want) {
		t.Fatalf("export: %d memories, %v; want %d", n, err, len(want))
	}
	sc := bufio.NewScanner(bytes.NewReader(exp.Bytes()))
	sc.Buffer(nil, s.importLine())
	lines := 0
	for ; sc.Scan(); lines++ {
	}
	if sc.Err() != nil || lines != len(want)+1 { // and the header
		t.Fatalf("export: %d lines of at most %d bytes, %v; want %d", lines, s.importLine(), sc.Err(), len(want)+1)
	}
	// The export imports into a new store as it was.
	o := opts
	o.Encryption = nil
	copyStore, err := Open(filepath.Join(t.TempDir(), FileName), o)
	if err != nil {
		t.Fatal(err)
	}
	defer copyStore.Close()
	rep, err := copyStore.Import(ctx, &exp, ImportFail)
	if err != nil || rep.Imported != len(want) {
		t.Fatalf("import of the export: %+v, %v", rep, err)
	}
	for id, w := range want {
		m, err := copyStore.Get(ctx, id)
		if err != nil || m.Text != w.Text || !reflect.DeepEqual(m.Metadata, w.Metadata) {
			t.Fatalf("imported memory: %v", err)
		}
	}
	var backup bytes.Buffer
	if _, err := s.Backup(ctx, &backup); err != nil || backup.Len() == 0 {
		t.Fatalf("backup: %d bytes, %v", backup.Len(), err)
	}
}
