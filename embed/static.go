package embed

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"github.com/memgate/memgate/search"
)

// cacheMagic starts a binary copy of a vectors file:
//
//	"MGVEC2\n"
//	uint32   words, dimensions (little-endian)
//	uint64   the bytes of the words that follow
//	per word: uvarint length, the word's bytes, uint32 rank
//	zero bytes up to a multiple of 4 from the start
//	float32  every word's unit vector, in word order (little-endian)
//
// The vectors are mapped from the file, not read: a restart pays for the
// pages a search touches, not for 130 MB.
const cacheMagic = "MGVEC2\n"

// LoadFile reads the word vectors in path: the JSON of an npm
// wink-embeddings package ({"dimensions":D,"vectors":{"word":[D numbers,
// norm, rank],…}}), read as a stream, or GloVe-style text (a word and its
// numbers per line, most frequent first). It returns them with the hex
// SHA-256 of the file.
//
// With cacheDir set, a binary copy named by that hash is kept there: the
// next LoadFile of the same file reads the copy instead (a tenth of the
// time), and a changed file gets a new copy.
func LoadFile(path, cacheDir string) (*search.Vectors, string, error) {
	sum, err := fileHash(path, cacheDir)
	if err != nil {
		return nil, "", err
	}
	cache := ""
	if cacheDir != "" {
		cache = filepath.Join(cacheDir, sum+".vec")
		if v, err := readCache(cache); err == nil {
			return v, sum, nil
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	v, err := Parse(f)
	if err != nil {
		return nil, "", fmt.Errorf("embed: %s: %w", filepath.Base(path), err)
	}
	if cache != "" {
		// A cache that cannot be written costs the next start time only.
		_ = writeCache(cache, v)
	}
	return v, sum, nil
}

// fileHash is hashFile, remembered in cacheDir (when set) by the file's
// size, time and inode: hashing 300 MB takes longer than reading the cache.
// A file changed in place changes its time, so it is hashed again.
func fileHash(path, cacheDir string) (string, error) {
	if cacheDir == "" {
		return hashFile(path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	stamp := fmt.Sprintf("%d %d %d", fi.Size(), fi.ModTime().UnixNano(), inode(fi))
	abs, _ := filepath.Abs(path)
	name := filepath.Join(cacheDir, fmt.Sprintf("%x.stamp", sha256.Sum256([]byte(abs))))
	if b, err := os.ReadFile(name); err == nil {
		if got, sum, ok := strings.Cut(string(b), "\n"); ok && got == stamp && len(sum) == 64 {
			return sum, nil
		}
	}
	sum, err := hashFile(path)
	if err != nil {
		return "", err
	}
	if os.MkdirAll(cacheDir, 0o700) == nil {
		_ = os.WriteFile(name, []byte(stamp+"\n"+sum), 0o600)
	}
	return sum, nil
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, f, make([]byte, 1<<20)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Parse reads word vectors in either format from r.
func Parse(r io.Reader) (*search.Vectors, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		b, err := br.Peek(1)
		if err != nil {
			return nil, errors.New("no word vectors")
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			_, _ = br.ReadByte()
			continue
		case '{':
			return parseWink(br)
		}
		return parseText(br)
	}
}

// parseWink decodes the wink JSON a token at a time, so only one word's
// numbers are decoded at once whatever the size of the file.
func parseWink(r io.Reader) (*search.Vectors, error) {
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	dim, size := 0, 0
	var v *search.Vectors
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch key {
		case "dimensions":
			if err := dec.Decode(&dim); err != nil || dim <= 0 || dim > 4096 {
				return nil, errors.New("bad dimensions")
			}
		case "size":
			if err := dec.Decode(&size); err != nil {
				return nil, errors.New("bad size")
			}
		case "vectors":
			if dim == 0 {
				return nil, errors.New("vectors before their dimensions")
			}
			v = search.NewVectors(dim, min(max(size, 0), 1<<22))
			if err := expectDelim(dec, '{'); err != nil {
				return nil, err
			}
			var entry []float32
			for n := 0; dec.More(); n++ {
				tok, err := dec.Token()
				if err != nil {
					return nil, err
				}
				word, _ := tok.(string)
				entry = entry[:0]
				if err := dec.Decode(&entry); err != nil {
					return nil, fmt.Errorf("the vector of entry %d: %w", n, err)
				}
				rank := n
				switch len(entry) {
				case dim + 2: // the vector, its norm, its frequency rank
					rank = int(entry[dim+1])
				case dim:
				default:
					return nil, fmt.Errorf("entry %d has %d numbers, not %d", n, len(entry), dim)
				}
				v.Add(word, entry[:dim], rank)
			}
			if err := expectDelim(dec, '}'); err != nil {
				return nil, err
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, err
			}
		}
	}
	if v == nil || v.Len() == 0 {
		return nil, errors.New("no word vectors")
	}
	v.Seal()
	return v, nil
}

func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("expected %v", d)
	}
	return nil
}

// parseText reads GloVe-style lines: a word, then its numbers, separated by
// spaces; the line order is the frequency order.
func parseText(br *bufio.Reader) (*search.Vectors, error) {
	var v *search.Vectors
	var vec []float32
	for n := 0; ; n++ {
		line, err := br.ReadString('\n')
		if line = strings.TrimRight(line, "\r\n"); line != "" {
			fields := strings.Fields(line)
			if v == nil {
				if len(fields) < 2 {
					return nil, errors.New("a line without numbers")
				}
				v = search.NewVectors(len(fields)-1, 1024)
			}
			if len(fields) != v.Dim()+1 {
				return nil, fmt.Errorf("line %d has %d numbers, not %d", n+1, len(fields)-1, v.Dim())
			}
			vec = vec[:0]
			for _, f := range fields[1:] {
				x, perr := strconv.ParseFloat(f, 32)
				if perr != nil {
					return nil, fmt.Errorf("line %d: a number that is not", n+1)
				}
				vec = append(vec, float32(x))
			}
			v.Add(strings.ToLower(fields[0]), vec, n)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if v == nil || v.Len() == 0 {
		return nil, errors.New("no word vectors")
	}
	v.Seal()
	return v, nil
}

// floatsOf is b as little-endian float32s: b itself where the machine is
// little-endian too (b is 4-aligned: a mapping's offset that is a multiple
// of 4), a decoded copy elsewhere.
func floatsOf(b []byte) []float32 {
	n := len(b) / 4
	if n == 0 {
		return nil
	}
	if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 && uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func writeCache(path string, v *search.Vectors) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	var words []byte
	for i, rank := range v.Ranks() {
		word, _, _ := v.Word(i)
		words = binary.AppendUvarint(words, uint64(len(word)))
		words = append(words, word...)
		words = binary.LittleEndian.AppendUint32(words, uint32(rank))
	}
	head := []byte(cacheMagic)
	head = binary.LittleEndian.AppendUint32(head, uint32(v.Len()))
	head = binary.LittleEndian.AppendUint32(head, uint32(v.Dim()))
	head = binary.LittleEndian.AppendUint64(head, uint64(len(words)))
	head = append(head, words...)
	for len(head)%4 != 0 {
		head = append(head, 0)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".vec-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriterSize(tmp, 1<<20)
	w.Write(head)
	var b [4]byte
	for _, x := range v.Data() {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
		w.Write(b[:])
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

var errBadCache = errors.New("embed: a damaged vectors cache")

func readCache(path string) (*search.Vectors, error) {
	raw, err := mapFile(path)
	if err != nil {
		return nil, err
	}
	const head = len(cacheMagic) + 16
	if !bytes.HasPrefix(raw, []byte(cacheMagic)) || len(raw) < head {
		return nil, errBadCache
	}
	p := raw[len(cacheMagic):]
	n, dim := int(binary.LittleEndian.Uint32(p)), int(binary.LittleEndian.Uint32(p[4:]))
	size := binary.LittleEndian.Uint64(p[8:])
	if dim <= 0 || dim > 4096 || n <= 0 || size > uint64(len(raw)-head) {
		return nil, errBadCache
	}
	floats := (head + int(size) + 3) &^ 3
	if len(raw)-floats != n*dim*4 {
		return nil, errBadCache
	}
	// The words share one string: one allocation, not one per word.
	all := string(raw[head : head+int(size)])
	words, ranks := make([]string, n), make([]int32, n)
	off := 0
	for i := range n {
		l, k := binary.Uvarint([]byte(all[off:min(off+binary.MaxVarintLen64, len(all))]))
		if k <= 0 || uint64(len(all)-off-k) < l+4 {
			return nil, errBadCache
		}
		start := off + k
		words[i] = all[start : start+int(l)]
		ranks[i] = int32(binary.LittleEndian.Uint32([]byte(all[start+int(l) : start+int(l)+4])))
		off = start + int(l) + 4
	}
	if off != len(all) {
		return nil, errBadCache
	}
	v, ok := search.VectorsFrom(dim, words, ranks, floatsOf(raw[floats:]))
	if !ok {
		return nil, errBadCache
	}
	v.Seal()
	return v, nil
}
