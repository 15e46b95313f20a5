package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"
	"github.com/memgate/memgate/search"
)

// Hybrid recall. With Options.Embedder set, each memory's title and text
// get a vector, kept in the vectors bucket under the memory's document
// number (sealed like every value) with the model that made it:
//
//	byte     vectorFormat
//	bytes    the model, "name@version"
//	float32  the scale (little-endian)
//	int8     the quantised unit vector, one byte per dimension
//
// A write embeds its memory before it joins the committer, within
// Options.EmbedTimeout; if the embedder fails, the memory is written
// without a vector and the catch-up (catchUp) embeds it later, in batches,
// as it does memories written before an embedder was configured or under
// another model. Until then such memories are ranked lexically only.
//
// The vectors of the current model are also held in memory (vecIndex): the
// signs of their numbers one after the other, which a search scans for a
// shortlist (search.Shortlist), and their int8 rows, which it scores
// exactly, without reading bbolt or allocating. The index changes after a
// commit; a search keeps only the documents its own snapshot holds. Past
// clusterMin vectors it is also partitioned into clusters, trained in the
// background, and a search scans the signs of the clusters nearest its
// query only.
var bucketVectors = []byte("vectors")

const vectorFormat = 1

// Embedder turns texts into unit vectors (nil for a text it has nothing
// for). It answers search.ErrNotReady while it loads, search.ErrUnavailable
// when it cannot be reached, or the context's error on a timeout.
type Embedder interface {
	// Model names the model and its version; the version may be "" until
	// the embedder is ready.
	Model() (name, version string)
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Fallback reasons, for memgate.Receipt.SemanticFallback.
const (
	FallbackNotReady    = "not_ready"
	FallbackUnavailable = "unavailable"
	FallbackTimeout     = "timeout"
	FallbackError       = "error"
	// FallbackDisabled: the search is of a view across namespaces, which
	// ranks lexically (one BM25 scale for them all).
	FallbackDisabled = "disabled"
)

// fallbackOf names why err kept a search lexical.
func fallbackOf(err error) string {
	switch {
	case errors.Is(err, search.ErrNotReady):
		return FallbackNotReady
	case errors.Is(err, search.ErrUnavailable):
		return FallbackUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return FallbackTimeout
	}
	return FallbackError
}

// semanticDepth is how many of each ranking are fused: enough that a
// memory ranked well by one retriever and poorly by the other still meets
// the limit.
const semanticDepth = 50

// semanticMargin keeps out of the semantic ranking the memories whose
// cosine is this far below the best one's: in a large store of everyday
// text, averaged word vectors put hundreds of memories a little below the
// best, and ranking them would let each one that also holds a query word
// pass the memory BM25 ranks first.
const semanticMargin = 0.1

// lexicalShare keeps out of the fusion the memories whose BM25 score is
// below this share of the best one's, for the same reason: a memory that
// holds one or two words of a three-word query would otherwise pass, with a
// modest semantic rank, the memory that holds all three.
const lexicalShare = 0.7

// semanticWeightBehindWhole weighs the semantic ranking when one of the
// memories BM25 ranks within the limit holds every term of the query: the
// query then names what it wants in the memories' own words, and the
// vectors only reorder the lexical ranking, their own memories coming after
// its (at 0.5, the first of them weighs less than the 50th of BM25's).
// Otherwise, as when BM25 finds nothing or matches a word or two of a
// paraphrase, both rankings weigh alike. On the known-item queries of
// bench/hybrid at 100k, fusing alike lost 1% of the targets BM25 alone put
// in the first five, to memories of the vectors alone.
const semanticWeightBehindWhole = 0.5

// holdsEvery reports whether doc's record gives every one of terms.
func holdsEvery(t *txn, doc uint64, terms []string) (bool, error) {
	r, err := t.record(doc)
	if err != nil {
		return false, err
	}
	have := search.AppendTerms(nil, r.indexText())
	for _, term := range terms {
		if !slices.Contains(have, term) {
			return false, nil
		}
	}
	return true, nil
}

// modelID is how a vector names its model.
func modelID(name, version string) string { return name + "@" + version }

func (s *Store) embedTimeout() time.Duration {
	if s.opts.EmbedTimeout > 0 {
		return s.opts.EmbedTimeout
	}
	return 2 * time.Second
}

// embedOne embeds text with the store's embedder within its timeout. It
// returns the vector (nil for none) and the model, or the error.
func (s *Store) embedOne(ctx context.Context, text string) ([]float32, string, error) {
	e := s.opts.Embedder
	ctx, cancel := context.WithTimeout(ctx, s.embedTimeout())
	defer cancel()
	vecs, err := e.Embed(ctx, []string{text})
	if err == nil && len(vecs) != 1 {
		err = errors.New("storage: the embedder answered the wrong number of vectors")
	}
	if err != nil {
		if ctx.Err() != nil {
			err = errors.Join(err, context.DeadlineExceeded)
		}
		return nil, "", err
	}
	name, version := e.Model()
	return vecs[0], modelID(name, version), nil
}

// embedText is what a memory's vector is made from.
func embedText(r *record) string {
	if r.title == "" {
		return r.text
	}
	return r.title + "\n" + r.text
}

// storedVector is one vector as written.
type storedVector struct {
	model string
	scale float32
	q     []int8
}

// vectorOf is what is stored for vec: for a text without a vector (nil),
// the model alone, so that the catch-up does not try it again.
func vectorOf(vec []float32, model string) *storedVector {
	if vec == nil {
		return &storedVector{model: model}
	}
	q, scale := search.Quantize(make([]int8, 0, len(vec)), vec)
	return &storedVector{model: model, scale: scale, q: q}
}

func (v *storedVector) marshal() []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen32+len(v.model)+4+len(v.q))
	b = append(b, vectorFormat)
	b = appendBytes(b, v.model)
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v.scale))
	for _, x := range v.q {
		b = append(b, byte(x))
	}
	return b
}

// unmarshalVectorShared is unmarshalVector whose numbers share b's memory
// (and whose model is compared, not kept): loading the index allocates
// nothing per memory.
func unmarshalVectorShared(b []byte) (storedVector, error) {
	if len(b) < 1 || b[0] != vectorFormat {
		return storedVector{}, errBadRecord
	}
	b = b[1:]
	l, n := binary.Uvarint(b)
	if n <= 0 || uint64(len(b)-n) < l+4 {
		return storedVector{}, errBadRecord
	}
	v := storedVector{model: unsafe.String(unsafe.SliceData(b[n:]), int(l))}
	b = b[n+int(l):]
	v.scale = math.Float32frombits(binary.LittleEndian.Uint32(b))
	if q := b[4:]; len(q) > 0 {
		v.q = unsafe.Slice((*int8)(unsafe.Pointer(&q[0])), len(q))
	}
	return v, nil
}

// unmarshalVector decodes a stored vector into memory of its own.
func unmarshalVector(b []byte) (storedVector, error) {
	v, err := unmarshalVectorShared(b)
	if err != nil {
		return storedVector{}, err
	}
	v.model, v.q = strings.Clone(v.model), slices.Clone(v.q)
	return v, nil
}

// putVector writes doc's vector in t, and lists it for the index.
func (t *txn) putVector(doc uint64, v *storedVector) error {
	b, err := t.bucket(bucketVectors)
	if err != nil {
		return err
	}
	key := u64(doc)
	if err := b.Put(key, t.s.seal.seal(bucketVectors, key, v.marshal())); err != nil {
		return err
	}
	t.vecAdds = append(t.vecAdds, vecAdd{doc: doc, v: v})
	return nil
}

// dropVector deletes doc's vector, if it has one.
func (t *txn) dropVector(doc uint64) error {
	b := t.tx.Bucket(bucketVectors)
	if b == nil {
		return nil
	}
	if b.Get(u64(doc)) == nil {
		return nil
	}
	t.vecDrops = append(t.vecDrops, doc)
	return b.Delete(u64(doc))
}

type vecAdd struct {
	doc uint64
	v   *storedVector
}

// vecIndex holds the vectors of one model in memory. A vector's slot has a
// row, its document, scale and numbers side by side so that scoring it
// exactly reads one place in memory (rowHead and dim bytes):
//
//	uint64   the document (little-endian)
//	float32  the scale
//	int8     the quantised unit vector
//
// and, apart, the signs of its numbers (search.SignWords(dim) words), which
// a search scans first, one after the other.
type vecIndex struct {
	mu    sync.RWMutex
	model string // "" until loaded
	dim   int
	docs  []uint64
	rows  []byte
	signs []uint64
	slot  map[uint64]int
	blank map[uint64]bool // documents of the model that have no vector (no known word)
	wake  chan struct{}   // the catch-up's: a write went without a vector
	ready atomic.Int64    // len(docs), read by stats without the lock

	// The clusters, once trained (nil until then: a search scans every
	// vector). Each cluster's members are the slots of its vectors with
	// their signs, side by side; where and whereC give a slot's place among
	// its cluster's members and its cluster.
	clusters *search.Clusters
	members  []clusterMembers
	where    []int32
	whereC   []int32
	trained  int               // the vectors the clusters were trained on
	training bool              // a training runs
	save     func(kept []byte) // keeps clusters in the store; nil: they are not kept
	gen      uint64            // counts the loads, so that a training of an earlier one is dropped
	stop     context.Context
	trainers sync.WaitGroup
	log      *slog.Logger
}

// clusterMembers are the vectors of one cluster: their slots, and their
// residual codes (search.AppendResidual) one after the other.
type clusterMembers struct {
	slots []int32
	signs []uint64
	alpha []float32
}

// apply records a committed transaction's vectors.
func (ix *vecIndex) apply(adds []vecAdd, drops []uint64) {
	if len(adds) == 0 && len(drops) == 0 {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.model == "" {
		return // not loaded: the load reads them from the file
	}
	for _, d := range drops {
		ix.remove(d)
	}
	for _, a := range adds {
		if ix.dim == 0 && a.v.model == ix.model {
			ix.dim = len(a.v.q)
		}
		if a.v.model == ix.model && len(a.v.q) == 0 {
			ix.remove(a.doc)
			ix.blank[a.doc] = true
			continue
		}
		if a.v.model != ix.model || len(a.v.q) != ix.dim || ix.dim == 0 {
			ix.remove(a.doc)
			continue
		}
		ix.add(a.doc, a.v)
	}
	ix.ready.Store(int64(len(ix.docs) + len(ix.blank)))
	ix.maybeTrain()
}

// rowHead is the bytes of a row before its numbers.
const rowHead = 12

func (ix *vecIndex) stride() int { return rowHead + ix.dim }

// appendRow appends doc's row for v to dst.
func appendRow(dst []byte, doc uint64, v *storedVector) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, doc)
	dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v.scale))
	for _, x := range v.q {
		dst = append(dst, byte(x))
	}
	return dst
}

// rowCosine is the cosine of query with the vector of row, and the row's
// document.
func rowCosine(query []float32, row []byte) (float64, uint64) {
	return float64(search.Dot8(query, rowNumbers(row)) * rowScale(row)), binary.LittleEndian.Uint64(row)
}

// rowScale and rowNumbers are the scale and the quantised numbers of row.
func rowScale(row []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(row[8:])) }

func rowNumbers(row []byte) []int8 {
	return unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(row[rowHead:]))), len(row)-rowHead)
}

func (ix *vecIndex) add(doc uint64, v *storedVector) {
	words, stride := search.SignWords(ix.dim), ix.stride()
	if i, ok := ix.slot[doc]; ok {
		appendRow(ix.rows[i*stride:i*stride], doc, v)
		search.AppendSigns(ix.signs[i*words:i*words], v.q)
		if ix.clusters != nil {
			ix.leave(i)
			ix.join(i, ix.clusters.Nearest8(v.q))
		}
		return
	}
	i := len(ix.docs)
	ix.slot[doc] = i
	ix.docs = append(ix.docs, doc)
	ix.rows = appendRow(ix.rows, doc, v)
	ix.signs = search.AppendSigns(ix.signs, v.q)
	if ix.clusters != nil {
		ix.where, ix.whereC = append(ix.where, 0), append(ix.whereC, 0)
		ix.join(i, ix.clusters.Nearest8(v.q))
	}
}

// join makes slot i a member of cluster c.
func (ix *vecIndex) join(i, c int) {
	m := &ix.members[c]
	ix.where[i], ix.whereC[i] = int32(len(m.slots)), int32(c)
	m.slots = append(m.slots, int32(i))
	row := ix.rows[i*ix.stride() : (i+1)*ix.stride()]
	var alpha float32
	m.signs, alpha = search.AppendResidual(m.signs, rowNumbers(row), rowScale(row), ix.clusters.Centroid(c))
	m.alpha = append(m.alpha, alpha)
}

// leave takes slot i out of its cluster, moving the cluster's last member
// into its place.
func (ix *vecIndex) leave(i int) {
	words := search.SignWords(ix.dim)
	m := &ix.members[ix.whereC[i]]
	p, last := int(ix.where[i]), len(m.slots)-1
	if p != last {
		moved := m.slots[last]
		m.slots[p] = moved
		copy(m.signs[p*words:(p+1)*words], m.signs[last*words:])
		m.alpha[p] = m.alpha[last]
		ix.where[moved] = int32(p)
	}
	m.slots, m.signs, m.alpha = m.slots[:last], m.signs[:last*words], m.alpha[:last]
}

// remove moves the last vector into doc's place.
func (ix *vecIndex) remove(doc uint64) {
	delete(ix.blank, doc)
	i, ok := ix.slot[doc]
	if !ok {
		return
	}
	last := len(ix.docs) - 1
	words, stride := search.SignWords(ix.dim), ix.stride()
	if ix.clusters != nil {
		ix.leave(i)
	}
	if i != last {
		moved := ix.docs[last]
		ix.docs[i] = moved
		copy(ix.rows[i*stride:(i+1)*stride], ix.rows[last*stride:])
		copy(ix.signs[i*words:(i+1)*words], ix.signs[last*words:])
		ix.slot[moved] = i
		if ix.clusters != nil {
			c, p := ix.whereC[last], ix.where[last]
			ix.members[c].slots[p] = int32(i)
			ix.where[i], ix.whereC[i] = p, c
		}
	}
	delete(ix.slot, doc)
	ix.docs, ix.rows, ix.signs = ix.docs[:last], ix.rows[:last*stride], ix.signs[:last*words]
	if ix.clusters != nil {
		ix.where, ix.whereC = ix.where[:last], ix.whereC[:last]
	}
}

// ensureVectors loads the index for model if it holds another. Its
// dimensions are those of the model's first vector.
func (s *Store) ensureVectors(model string) error {
	ix := &s.vecs
	ix.mu.RLock()
	ok := ix.model == model
	ix.mu.RUnlock()
	if ok {
		return nil
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.model == model {
		return nil
	}
	ix.model, ix.dim = "", 0
	ix.docs, ix.rows, ix.signs, ix.slot, ix.blank = nil, nil, nil, map[uint64]int{}, map[uint64]bool{}
	ix.clusters, ix.members, ix.where, ix.whereC, ix.trained = nil, nil, nil, nil, 0
	ix.gen++
	var kept keptClusters
	keptOK := false
	err := s.readTx("storage.vectors", func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketVectors)
		if b == nil {
			return nil
		}
		if raw := b.Get(clustersKey); raw != nil {
			if plain, err := s.seal.open(bucketVectors, clustersKey, raw); err == nil {
				kept, keptOK = unmarshalClusters(plain)
			}
			if !keptOK {
				s.log.Warn("the kept clusters of the vectors are unreadable: they are trained again", "op", "storage.vectors")
			}
		}
		return b.ForEach(func(k, raw []byte) error {
			if len(k) != 8 {
				return nil // the kept clusters, read above
			}
			plain, err := s.seal.open(bucketVectors, k, raw)
			if err != nil {
				return err
			}
			// The vector is copied into the index, not kept: plain may be
			// bbolt's memory.
			v, err := unmarshalVectorShared(plain)
			if err != nil {
				return err
			}
			if ix.dim == 0 && v.model == model {
				ix.dim = len(v.q)
			}
			if v.model == model && len(v.q) == 0 && len(k) == 8 {
				ix.blank[binary.BigEndian.Uint64(k)] = true
			}
			if v.model == model && len(v.q) == ix.dim && ix.dim > 0 && len(k) == 8 {
				ix.add(binary.BigEndian.Uint64(k), &v)
			}
			return nil
		})
	})
	if err != nil {
		ix.docs, ix.rows, ix.signs, ix.slot = nil, nil, nil, nil
		return err
	}
	ix.model = model
	ix.ready.Store(int64(len(ix.docs) + len(ix.blank)))
	if keptOK && kept.model == model && kept.clusters.Dim() == ix.dim && len(ix.docs) >= clusterMin {
		ix.install(kept.clusters, kept.trained, kept.sorted, kept.assign)
	}
	ix.maybeTrain()
	return nil
}

// Embedded reports how many memories the current model has embedded
// (those with no known word included); the rest are ranked lexically until
// the catch-up embeds them.
func (s *Store) Embedded() int64 { return s.vecs.ready.Load() }

// semantic ranks the documents of v whose vectors are closest to query, at
// or above search.CosineFloor and within semanticMargin of the best, that
// pass keep, best first; at most n. near is what semanticScan found for v.
//
// A document the index still holds just after a commit that deleted it
// (the index changes after the commit) is not checked for here, which
// would cost a lookup a document: rankHybrid drops it when it comes among
// the hits.
func (s *Store) semantic(v *view, near []search.Scored, n int, keep func(doc uint64) (bool, error)) ([]search.Scored, error) {
	out := make([]search.Scored, 0, min(n, len(near)))
	for _, sc := range near {
		// The margin is measured from the best memory kept: memories a
		// filter leaves out do not narrow what it keeps.
		if len(out) == n || len(out) > 0 && sc.Score < out[0].Score-semanticMargin {
			break
		}
		if v.dead(sc.Doc) || v.expired1(sc.Doc) {
			continue
		}
		if keep != nil {
			ok, err := keep(sc.Doc)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		out = append(out, sc)
	}
	return out, nil
}

// shortlistSize is how many vectors nearest the query by sign a scan
// scores exactly (see search.Shortlist): on the memories of bench/hybrid
// at 100k, 93% of the five nearest by cosine are among the 512 nearest by
// sign (TestVectorsAlone), and scoring them costs less than the scan.
const shortlistSize = 512

// scanState is a scan's memory, pooled: a search allocates none of it.
type scanState struct {
	list     search.Shortlist
	top      search.TopK
	query    search.SignQuery
	probe    search.Probe // the clusters, nearest the query first
	parts    []search.ResidualPart
	residual search.ResidualQuery
	touched  byte      // what reading the rows first read, kept so it is not optimised away
	cos      []float64 // the shortlist's exact cosines
}

var scanStates = sync.Pool{New: func() any { return new(scanState) }}

// semanticScan returns the documents, of a snapshot up to seq, whose
// vectors are nearest query, at or above search.CosineFloor, best first;
// at most k. It holds the index's read lock and reads no bbolt. Of equal
// cosines the larger document goes first, and the shortlist does not
// depend on the order of the vectors, so the answer is the same however
// the index was built (once clustered, however the clusters were: see
// clusters.go).
func (s *Store) semanticScan(query []float32, k int, seq uint64, share int) []search.Scored {
	ix := &s.vecs
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	dim := ix.dim
	if len(query) != dim || dim == 0 || len(ix.docs) == 0 {
		return nil
	}
	st := scanStates.Get().(*scanState)
	defer scanStates.Put(st)
	st.top.Reset(k)
	if ix.clusters == nil && len(ix.docs) <= exactScan {
		// A small index is scored whole, exactly: a shortlist by signs
		// can leave out a memory behind hundreds of near-duplicates.
		ix.scoreAll(st, query, seq)
		return st.top.Sorted()
	}
	list := &st.list
	// A search with a filter asks for more (k), most of which the filter
	// may leave out: the shortlist grows with it.
	want := shortlistSize
	if ix.clusters == nil {
		st.query.Set(query)
	} else {
		want = max(clusteredShortlist, 2*k)
		ix.clusters.Rank(&st.probe, query)
		probe, seen := probeWant(len(ix.docs), share), 0
		st.parts = st.parts[:0]
		for c, ok := st.probe.Next(); ok; c, ok = st.probe.Next() {
			m := &ix.members[c]
			st.parts = append(st.parts, search.ResidualPart{Signs: m.signs, Alpha: m.alpha, Slots: m.slots, Base: st.probe.Scores[c]})
			if seen += len(m.slots); seen >= probe {
				break
			}
		}
		st.residual.Set(query)
	}
	for {
		if ix.clusters == nil && want >= len(ix.docs) {
			st.top.Reset(k)
			ix.scoreAll(st, query, seq)
			return st.top.Sorted()
		}
		list.Reset(want)
		if ix.clusters == nil {
			list.Scan(ix.signs, &st.query, 0, len(ix.docs))
		} else {
			list.ScanResiduals(st.parts, &st.residual)
		}
		list.Finish(ix.docs)
		st.top.Reset(k)
		slots := list.Slots()
		// A shortlist more than half of whose rows are one and the same
		// vector (hundreds of memories that differ only by words the
		// vectors do not know) may have left out a nearer memory whose
		// signs agree less with the query's: it grows until they no longer
		// fill it, or holds every candidate.
		if !ix.scoreRows(st, query, seq, slots) || len(slots) < want {
			return st.top.Sorted()
		}
		want *= 4
	}
}

// scoreAll scores every vector of the index exactly into st.top.
func (ix *vecIndex) scoreAll(st *scanState, query []float32, seq uint64) {
	stride := ix.stride()
	for i := range ix.docs {
		c, doc := rowCosine(query, ix.rows[i*stride:(i+1)*stride])
		if c >= search.CosineFloor && doc <= seq {
			st.top.Push(doc, c)
		}
	}
}

// scoreRows scores the rows of slots exactly into st.top, and reports
// whether more than half of them are one and the same vector.
func (ix *vecIndex) scoreRows(st *scanState, query []float32, seq uint64, slots []int32) (flooded bool) {
	stride := ix.stride()
	// The rows are far apart in memory. Reading every line of each first,
	// in a loop that uses nothing it reads, lets their cache misses overlap
	// (some twenty at once); scoring them as they come waited for each
	// row's in turn (BenchmarkSemanticScanClustered, and about 30 µs of a
	// hybrid search at 100k).
	var touch byte
	for _, i := range slots {
		row := ix.rows[int(i)*stride : (int(i)+1)*stride]
		for j := 0; j < len(row); j += 56 { // every line a row spans
			touch += row[j]
		}
		touch += row[len(row)-1]
	}
	st.touched = touch
	// One and the same vector has one and the same cosine: the most
	// common cosine, by majority vote (Boyer and Moore), then counted.
	var major float64
	votes := 0
	st.cos = st.cos[:0]
	for _, i := range slots {
		c, doc := rowCosine(query, ix.rows[int(i)*stride:(int(i)+1)*stride])
		if c >= search.CosineFloor && doc <= seq {
			st.top.Push(doc, c)
		}
		st.cos = append(st.cos, c)
		switch {
		case votes == 0:
			major, votes = c, 1
		case c == major:
			votes++
		default:
			votes--
		}
	}
	same := 0
	for _, c := range st.cos {
		if c == major {
			same++
		}
	}
	return 2*same > len(slots)
}

// exactScan is the most vectors a scan scores every one of exactly
// (about 60 µs at 100 numbers each); past it, those nearest by signs.
const exactScan = 2048

// exactFiltered is the most memories a filter may pass for a hybrid
// search to score each of them exactly rather than scan them all and keep
// those it passes.
const exactFiltered = 4096

// filteredNear returns, when the filter f passes at most exactFiltered
// documents of the snapshot, the best k of them by their exact cosines
// with query, at or above search.CosineFloor (ok true); ok false when it
// passes more.
func (s *Store) filteredNear(v *view, w *walk, f *filter, query []float32, k int) (near []search.Scored, ok bool, err error) {
	g, err := f.fresh(v, w)
	if err != nil {
		return nil, false, err
	}
	docs := make([]uint64, 0, 64)
	for target := uint64(0); ; {
		doc, err := g.next(target)
		if err != nil {
			return nil, false, err
		}
		if doc == ascending.end() {
			break
		}
		if len(docs) == exactFiltered || dense(len(docs), doc, v.seq, exactFiltered) {
			return nil, false, nil
		}
		docs = append(docs, doc)
		target = doc + 1
	}
	ix := &s.vecs
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if len(query) != ix.dim {
		return nil, true, nil
	}
	top := search.NewTopK(k)
	stride := ix.stride()
	for _, doc := range docs {
		i, has := ix.slot[doc]
		if !has || doc > v.seq {
			continue
		}
		if c, _ := rowCosine(query, ix.rows[i*stride:(i+1)*stride]); c >= search.CosineFloor {
			top.Push(doc, c)
		}
	}
	return top.Sorted(), true, nil
}

// cosine is doc's cosine with query, if doc has a vector.
func (s *Store) cosine(doc uint64, query []float32) (float64, bool) {
	ix := &s.vecs
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	i, ok := ix.slot[doc]
	if !ok || len(query) != ix.dim {
		return 0, false
	}
	c, _ := rowCosine(query, ix.rows[i*ix.stride():(i+1)*ix.stride()])
	return c, true
}

// withCosines adds to near, the scan's nearest documents best first, the
// documents of lexical it lacks, each with its exact cosine (at or above
// search.CosineFloor), and sorts it again. The scan of a clustered index is
// approximate: a memory BM25 ranks can be missing from its list though as
// near as those it holds, and would then get no semantic rank while the
// memories around it do.
func (s *Store) withCosines(near, lexical []search.Scored, query []float32) []search.Scored {
	ix := &s.vecs
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if len(query) != ix.dim {
		return near
	}
	added := false
	for _, l := range lexical {
		if slices.ContainsFunc(near, func(n search.Scored) bool { return n.Doc == l.Doc }) {
			continue
		}
		i, ok := ix.slot[l.Doc]
		if !ok {
			continue
		}
		if c, _ := rowCosine(query, ix.rows[i*ix.stride():(i+1)*ix.stride()]); c >= search.CosineFloor {
			near = append(near, search.Scored{Doc: l.Doc, Score: c})
			added = true
		}
	}
	if added {
		search.SortScored(near)
	}
	return near
}

// catchUpBatch is how many memories the catch-up embeds at a time.
const catchUpBatch = 32

// catchUp embeds, in the background, the memories without a vector of the
// embedder's model, a batch at a time, each batch its own commit behind the
// writers. It walks the documents in order and starts over when a write
// goes without a vector or the model changes; it waits, doubling up to
// 5s, while the embedder fails.
func (s *Store) catchUp(ctx context.Context) {
	e := s.opts.Embedder
	backoff := 100 * time.Millisecond
	wait := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		case <-s.vecs.wake:
			return true
		}
	}
	var after uint64
	model := ""
	failing := false // the last batch failed, and that was logged
	for ctx.Err() == nil {
		name, version := e.Model()
		if version == "" {
			// An embedder learns its version from its first answer.
			pctx, cancel := context.WithTimeout(ctx, s.embedTimeout())
			_, err := e.Embed(pctx, []string{"memgate"})
			cancel()
			if err != nil {
				backoff = min(2*backoff, time.Second)
				if errors.Is(err, search.ErrUnavailable) {
					backoff = min(2*backoff, 5*time.Second)
				}
			}
			if !wait(backoff) {
				return
			}
			continue
		}
		if m := modelID(name, version); m != model {
			model, after = m, 0
			if err := s.ensureVectors(model); err != nil {
				s.log.Warn("loading the vectors failed", "op", "storage.catchUp", "error", err)
			}
		}
		batch, texts, err := s.missingVectors(model, after)
		if err != nil {
			s.log.Warn("reading memories to embed failed", "op", "storage.catchUp", "error", err)
			if !wait(30 * time.Second) {
				return
			}
			continue
		}
		if len(batch) == 0 {
			after = 0
			backoff = 100 * time.Millisecond
			if !wait(time.Minute) {
				return
			}
			continue
		}
		ectx, cancel := context.WithTimeout(ctx, s.embedTimeout()*4)
		vecs, err := e.Embed(ectx, texts)
		cancel()
		if err == nil && len(vecs) != len(batch) {
			err = errors.New("the embedder answered the wrong number of vectors")
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				// Once, not at every retry; the reason alone (the error
				// could name what was asked).
				failing = true
				s.log.Warn("the embedder fails: memories written meanwhile are ranked lexically until it answers",
					"op", "storage.catchUp", "reason", fallbackOf(err))
			}
			backoff = min(2*backoff, 5*time.Second)
			if !wait(backoff) {
				return
			}
			continue
		}
		if failing {
			failing = false
			s.log.Info("the embedder answers again", "op", "storage.catchUp")
		}
		backoff = 100 * time.Millisecond
		_ = s.write.do(func(t *txn) error {
			for i, doc := range batch {
				if t.docs.Get(u64(doc)) == nil {
					continue // forgotten or replaced meanwhile
				}
				v := vectorOf(vecs[i], model)
				if err := t.putVector(doc, v); err != nil {
					return err
				}
			}
			return nil
		})
		after = batch[len(batch)-1]
	}
}

// missingVectors returns up to catchUpBatch documents after after that have
// no vector of model, with their texts to embed.
func (s *Store) missingVectors(model string, after uint64) ([]uint64, []string, error) {
	var docs []uint64
	var texts []string
	err := s.readTx("storage.catchUp", func(tx *bolt.Tx) error {
		vb := tx.Bucket(bucketVectors)
		c := tx.Bucket(bucketDocs).Cursor()
		t := s.txn(tx)
		for k, _ := c.Seek(u64(after + 1)); k != nil && len(docs) < catchUpBatch; k, _ = c.Next() {
			if len(k) != 8 {
				return errBadRecord
			}
			doc := binary.BigEndian.Uint64(k)
			if vb != nil {
				if raw := vb.Get(k); raw != nil {
					plain, err := s.seal.open(bucketVectors, k, raw)
					if err != nil {
						return err
					}
					if v, err := unmarshalVector(plain); err == nil && v.model == model {
						continue
					}
				}
			}
			r, err := t.record(doc)
			if err != nil {
				return err
			}
			docs = append(docs, doc)
			texts = append(texts, embedText(&r))
		}
		return nil
	})
	return docs, texts, err
}

// startVectors starts the catch-up of a store with an embedder.
func (s *Store) startVectors() {
	if s.opts.Embedder == nil {
		return
	}
	s.vecs.wake = make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	s.vecs.stop, s.vecs.log = ctx, s.log
	if s.repl == nil {
		s.vecs.save = s.saveClusters
	}
	done := make(chan struct{})
	s.stopVectors = func() { cancel(); <-done; s.vecs.trainers.Wait() }
	go func() {
		defer close(done)
		// A bug that panics here stops this store's catch-up (its memories
		// stay lexical until it opens again), not the process.
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("embedding in the background stopped", "op", "storage.catchUp", "error", fmt.Sprintf("panic: %T", r))
			}
		}()
		s.catchUp(ctx)
	}()
}

// wakeCatchUp tells the catch-up that a memory went without a vector.
func (s *Store) wakeCatchUp() {
	select {
	case s.vecs.wake <- struct{}{}:
	default:
	}
}

// prepareVector embeds a memory about to be written. A failure is not the
// write's: the memory goes without a vector, and once the write commits
// the catch-up is woken to embed it (woken before, it could look for the
// memory before it is there, find nothing and sleep a minute).
func (s *Store) prepareVector(ctx context.Context, r *record) *storedVector {
	if s.opts.Embedder == nil {
		return nil
	}
	if s.replayed() != nil {
		// A replica applying the log does not wait for an embedder per
		// entry: the catch-up embeds what it applied.
		return nil
	}
	vec, model, err := s.embedOne(ctx, embedText(r))
	if err != nil {
		return nil
	}
	return vectorOf(vec, model)
}

// hybrid is a search's query vector (nil when none of its words has one).
type hybrid struct {
	vec []float32
}

// embedQuery embeds a search's text and says so in receipt: hybrid with
// the model, or lexical with the reason (then it returns nil).
func (s *Store) embedQuery(ctx context.Context, text string, receipt *memgate.Receipt) *hybrid {
	vec, model, err := s.embedOne(ctx, text)
	if err == nil {
		err = s.ensureVectors(model)
	}
	if err != nil {
		if ctx.Err() == nil {
			receipt.SemanticFallback = fallbackOf(err)
		}
		return nil
	}
	name, version := s.opts.Embedder.Model()
	receipt.RetrievalMode = memgate.RetrievalHybrid
	receipt.EmbeddingModel, receipt.EmbeddingVersion = name, version
	return &hybrid{vec: vec}
}

// rankHybrid ranks by BM25 and by cosine, each to semanticDepth or limit,
// fuses the two by reciprocal rank, and loads the best limit as hits: score
// is the fused score relative to the best, lexical_score the BM25 score (0
// for a memory only the vectors found), semantic_score the cosine (0 for a
// memory without a vector).
func (s *Store) rankHybrid(v *view, w *walk, terms []string, f *filter, limit int, hy *hybrid) ([]memgate.Hit, int, error) {
	depth := max(limit, semanticDepth)
	var ranked, lexical []search.Scored
	var whole wholeTerms
	candidates := 0
	t := s.txn(v.tx)
	cut := &lexicalCut{share: lexicalShare, keep: limit}
	defer func() {
		if cut.release != nil {
			cut.release()
		}
	}()
	if len(terms) > 0 {
		var err error
		if ranked, candidates, err = s.rank(v, w, terms, f, depth, memgate.Corpus{}, &whole, cut); err != nil {
			return nil, 0, err
		}
		// The fusion takes the lexical hits of at least lexicalShare of the
		// best, and every one that holds every term (with one term, all).
		// Where the ranking cannot tell which those are (an array of
		// scores), the records of the first limit tell, as for
		// behindWhole below; reading the fifty would cost more than the
		// search.
		lexical = make([]search.Scored, 0, len(ranked))
		for i, l := range ranked {
			keep := len(terms) == 1 || l.Score >= lexicalShare*ranked[0].Score
			switch {
			case keep:
			case whole.known:
				keep = whole.holds(l.Doc)
			case i < limit:
				if keep, err = holdsEvery(t, l.Doc, terms); err != nil {
					return nil, 0, err
				}
			}
			if keep {
				lexical = append(lexical, l)
			}
		}
	}
	// Behind a lexical hit that holds every term, the vectors weigh half
	// (semanticWeightBehindWhole) and mostly reorder BM25's memories, whose
	// cosines are exact (withCosines): the scan then probes a quarter as
	// far (shallowDivisor). On the known-item queries of bench/hybrid at
	// 100k that kept success@5 at 0.980 and took ~40 µs off the search.
	behindWhole := false
	if top := lexical[:min(limit, len(lexical))]; hy.vec != nil && whole.known {
		// The ranking saw which documents hold every term.
		behindWhole = whole.among(top)
	} else if hy.vec != nil {
		for _, l := range top {
			held, err := holdsEvery(t, l.Doc, terms)
			if err != nil {
				return nil, 0, err
			}
			if behindWhole = held; held {
				break
			}
		}
	}
	// The scan runs in the search's own goroutine: scanning beside the
	// lexical ranking, or in parts on several cores, measured slower on the
	// shared 2-core machine of docs/PERFORMANCE.md (each hand-off to another
	// goroutine waits for a core), and a server's cores serve other
	// searches anyway.
	var near []search.Scored
	if hy.vec != nil {
		k := depth + 16 // for the documents the snapshot no longer has
		exact := false
		if f != nil {
			// A filter that passes few memories has them scored exactly;
			// one that passes many, the scan's nearest that it passes.
			var err error
			if near, exact, err = s.filteredNear(v, w, f, hy.vec, k); err != nil {
				return nil, 0, err
			}
			k = 4*depth + 16 // for those the filter leaves out
		}
		if !exact {
			share := probeDivisor
			if behindWhole {
				share = shallowDivisor
			}
			near = s.semanticScan(hy.vec, k, v.seq, share)
		}
	}
	if len(near) > 0 && len(lexical) > 0 {
		near = s.withCosines(near, lexical, hy.vec)
	}
	var keep func(uint64) (bool, error)
	if f != nil {
		probe, err := f.fresh(v, w)
		if err != nil {
			return nil, 0, err
		}
		keep = probe.has
	}
	var semantic []search.Scored
	if len(near) > 0 {
		var err error
		if semantic, err = s.semantic(v, near, depth, keep); err != nil {
			return nil, 0, err
		}
	}
	lex := make(map[uint64]float64, len(ranked))
	for _, l := range ranked {
		lex[l.Doc] = l.Score
	}
	// The vectors' memories that hold none of the query's words add to the
	// candidates; the ranking counted those that hold one.
	rankedAll := candidates <= len(ranked)
	for _, sm := range semantic {
		if _, ok := lex[sm.Doc]; ok {
			continue
		}
		held, err := cut.holdsAny(t, sm.Doc, terms, rankedAll)
		if err != nil {
			return nil, 0, err
		}
		if !held {
			candidates++
		}
	}
	weight := 1.0
	if behindWhole {
		weight = semanticWeightBehindWhole
	}
	// The lexical hits the fusion left out fill the places the fused ones
	// leave, in their order.
	fill := cut.first
	if fill == nil {
		fill = ranked // the ranking ranked every document
	}
	for _, l := range fill {
		lex[l.Doc] = l.Score
	}
	fuse := func() []search.Scored {
		if behindWhole {
			return search.Fill(search.FuseBehind(lexical, semantic, weight, limit), fill, limit)
		}
		return search.Fill(search.FuseWeighted(lexical, semantic, weight, limit), fill, limit)
	}
	fused := fuse()
	// A document of the vector list may be gone from the snapshot (deleted
	// just before it): it gives its place up. The records read here are
	// the hits'.
	var vals [][]byte
	for {
		before := len(semantic)
		vals = vals[:0]
		for _, fu := range fused {
			val := t.docs.Get(u64(fu.Doc))
			if val == nil {
				semantic = slices.DeleteFunc(semantic, func(sm search.Scored) bool { return sm.Doc == fu.Doc })
			}
			vals = append(vals, val)
		}
		if len(semantic) == before {
			break
		}
		fused = fuse()
	}
	hits := make([]memgate.Hit, 0, len(fused))
	for i, fu := range fused {
		if vals[i] == nil {
			return nil, 0, errBadRecord // a lexical hit without its record
		}
		rec, err := s.decodeRecord(u64(fu.Doc), vals[i])
		if err != nil {
			return nil, 0, err
		}
		m, err := rec.memory(fu.Doc)
		if err != nil {
			return nil, 0, err
		}
		lexScore, ok := lex[fu.Doc]
		switch {
		case ok:
		case cut.scoreOf != nil:
			lexScore = cut.scoreOf(fu.Doc) // a memory of the vectors the ranking did not return
		default:
			lexScore = cut.score(&rec, terms)
		}
		h := memgate.Hit{Memory: m, Score: 1, LexicalScore: lexScore}
		if best := fused[0].Score; best > 0 {
			h.Score = fu.Score / best
		}
		cos := 0.0
		if hy.vec != nil {
			cos, _ = s.cosine(fu.Doc, hy.vec)
			// The vectors are kept as int8 numbers, so a cosine can pass 1
			// by a little.
			cos = math.Round(min(max(cos, -1), 1)*1e6) / 1e6
		}
		h.SemanticScore = &cos
		hits = append(hits, h)
	}
	return hits, candidates, nil
}
