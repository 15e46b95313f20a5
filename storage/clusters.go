package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/memgate/memgate/search"
)

// The clusters of the vector index (see search.Clusters). A store of fewer
// than clusterMin vectors is scanned whole: the scan is short, and every
// search sees the exact shortlist. Past it, the index trains clusters in
// the background — about the square root of the vectors, on a sample of at
// most trainSample of them in document order — and assigns every vector to
// one; until they are ready, searches scan everything as before. A search
// then scans the residual codes (search.AppendResidual) of the members of
// the clusters nearest its query until it has seen
// a probeShare of the vectors. The clusters are trained again when the
// index has doubled since; they are kept in the store (clustersKey), so a
// load does not train them again.
var clusterMin = 16384 // a variable for tests

const (
	trainSample  = 16384
	trainRounds  = 10
	minClusters  = 64
	maxClusters  = 1024
	probeDivisor = 16 // a search scans 1/probeDivisor of the vectors
	// A hybrid search one of whose lexical hits holds every term of its
	// query scans a quarter of that (see rankHybrid).
	shallowDivisor = 4 * probeDivisor
)

// clusterCount is how many clusters n vectors are trained into.
func clusterCount(n int) int {
	return min(max(int(math.Sqrt(float64(n))/2), minClusters), maxClusters)
}

// probeWant is how many vectors a search of a clustered index of n scans
// at least, when it scans 1/div of them.
func probeWant(n, div int) int { return max(n/div, 4*shortlistSize) }

// maybeTrain starts a training of clusters when the index is large enough
// and has none, or has doubled since its clusters were trained. It is
// called with ix.mu held for writing.
func (ix *vecIndex) maybeTrain() {
	n := len(ix.docs)
	if ix.stop == nil || ix.training || ix.stop.Err() != nil || n < clusterMin || ix.dim == 0 {
		return
	}
	if ix.clusters != nil && n < 2*ix.trained {
		return
	}
	ix.training = true
	gen := ix.gen
	ix.trainers.Add(1)
	go func() {
		defer ix.trainers.Done()
		defer func() {
			ix.mu.Lock()
			ix.training = false
			ix.mu.Unlock()
		}()
		// A bug that panics here leaves this store's vectors scanned whole,
		// not the process down.
		defer func() {
			if r := recover(); r != nil {
				ix.mu.Lock()
				ix.clusters, ix.members, ix.where, ix.whereC, ix.trained = nil, nil, nil, nil, 0
				ix.mu.Unlock()
				if ix.log != nil {
					ix.log.Error("training the vectors' clusters failed", "op", "storage.clusters", "error", fmt.Sprintf("panic: %T", r))
				}
			}
		}()
		// One training at a time in the process: a server opening many
		// large stores at once trains them in turn, each holding its copy
		// of the rows only while it trains.
		select {
		case trainings <- struct{}{}:
			defer func() { <-trainings }()
		case <-ix.stop.Done():
			return
		}
		ix.mu.RLock()
		if ix.gen != gen {
			ix.mu.RUnlock()
			return
		}
		docs, rows := slices.Clone(ix.docs), slices.Clone(ix.rows)
		dim, stride := ix.dim, ix.stride()
		ix.mu.RUnlock()
		ix.train(gen, dim, stride, docs, rows)
	}()
}

// trainClusters is search.TrainClusters; a variable for tests.
var trainClusters = search.TrainClusters

// trainings holds a token for each training that runs: one at a time.
var trainings = make(chan struct{}, 1)

// train clusters the vectors of a copy of the index (docs, and rows of
// stride bytes), assigns each to its cluster, and installs the clusters if
// the index is still of the same load.
func (ix *vecIndex) train(gen uint64, dim, stride int, docs []uint64, rows []byte) {
	// Document order, so that the same vectors give the same clusters
	// whatever the order the index holds them in.
	order := make([]int32, len(docs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if docs[a] < docs[b] {
			return -1
		}
		return 1
	})
	numbers := func(i int32) []int8 { return rowNumbers(rows[int(i)*stride : (int(i)+1)*stride]) }
	n := len(order)
	take := min(n, trainSample)
	sample := make([]int8, 0, take*dim)
	for j := range take {
		sample = append(sample, numbers(order[j*n/take])...)
	}
	clusters, err := trainClusters(ix.stop, sample, dim, clusterCount(n), trainRounds)
	if err != nil {
		return
	}
	sorted := make([]uint64, n)
	assign := make([]int32, n)
	for j, i := range order {
		if j%4096 == 0 && ix.stop.Err() != nil {
			return
		}
		sorted[j], assign[j] = docs[i], int32(clusters.Nearest8(numbers(i)))
	}

	ix.mu.Lock()
	if ix.gen != gen || ix.dim != dim {
		ix.mu.Unlock()
		return // reloaded meanwhile, perhaps for another model
	}
	ix.install(clusters, n, sorted, assign)
	model, save := ix.model, ix.save
	ix.mu.Unlock()
	if save != nil && ix.stop.Err() == nil {
		save(marshalClusters(model, clusters, n, sorted, assign))
	}
}

// install makes clusters the index's, trained on trained vectors: each
// vector of a document of sorted joins the cluster assign gives it, any
// other (written since) its nearest. It is called with ix.mu held for
// writing.
func (ix *vecIndex) install(clusters *search.Clusters, trained int, sorted []uint64, assign []int32) {
	ix.clusters, ix.trained = clusters, trained
	ix.members = make([]clusterMembers, clusters.K())
	ix.where, ix.whereC = make([]int32, len(ix.docs)), make([]int32, len(ix.docs))
	for i, doc := range ix.docs {
		c := 0
		if j, ok := slices.BinarySearch(sorted, doc); ok {
			c = int(assign[j])
		} else {
			c = clusters.Nearest8(rowNumbers(ix.rows[i*ix.stride() : (i+1)*ix.stride()]))
		}
		ix.join(i, c)
	}
}

// The clusters a training made are kept in the vectors bucket, sealed as
// every value, under clustersKey (no document's key: those are 8 bytes),
// so that a store opens with them instead of training again: about 4 s of
// a core at 100,000 vectors, a minute at a million, during which every
// search scans every vector. A vector written after them joins its nearest
// cluster at the load, as it does when written; they are trained again,
// and kept again, when the index has doubled since, as before. A replica
// of a shared store trains its own and keeps none.
var clustersKey = []byte("kept-clusters")

// clustersFormat is the first byte of the kept clusters (1 had no
// checksum: such clusters are trained again once).
const clustersFormat = 2

// maxDims bounds the dimensions kept clusters may say they have: more is
// damage (an embedding model's vectors have a few thousand at most).
const maxDims = 1 << 16

// marshalClusters is the kept form of clusters trained on trained vectors
// of model, the documents of sorted in cluster assign:
//
//	byte     clustersFormat
//	uvarint  the model's length, then the model
//	uvarint  dimensions, clusters
//	float32  the centroids, one after the other (little-endian)
//	uvarint  trained
//	uvarint  documents, then for each, its document less the one before and its cluster
//	uint32   CRC-32C of all that (little-endian): a flipped bit anywhere is
//	         damage, as a centroid's would otherwise pass for another centroid
func marshalClusters(model string, c *search.Clusters, trained int, sorted []uint64, assign []int32) []byte {
	cent := c.Centroids()
	b := make([]byte, 0, 16+len(model)+4*len(cent)+4*len(sorted))
	b = append(b, clustersFormat)
	b = binary.AppendUvarint(b, uint64(len(model)))
	b = append(b, model...)
	b = binary.AppendUvarint(b, uint64(c.Dim()))
	b = binary.AppendUvarint(b, uint64(c.K()))
	for _, x := range cent {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	b = binary.AppendUvarint(b, uint64(trained))
	b = binary.AppendUvarint(b, uint64(len(sorted)))
	prev := uint64(0)
	for j, doc := range sorted {
		b = binary.AppendUvarint(b, doc-prev)
		b = binary.AppendUvarint(b, uint64(assign[j]))
		prev = doc
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// keptClusters is what unmarshalClusters reads.
type keptClusters struct {
	model    string
	clusters *search.Clusters
	trained  int
	sorted   []uint64
	assign   []int32
}

// unmarshalClusters reads marshalClusters' form; false for anything else
// (another format, a cut or damaged value), which a load ignores: the
// clusters are trained again.
func unmarshalClusters(b []byte) (keptClusters, bool) {
	var kc keptClusters
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	if len(b) < 5 || b[0] != clustersFormat {
		return kc, false
	}
	sum := binary.LittleEndian.Uint32(b[len(b)-4:])
	if b = b[:len(b)-4]; crc32.Checksum(b, castagnoli) != sum {
		return kc, false
	}
	b = b[1:]
	ml, ok := next()
	if !ok || ml > uint64(len(b)) {
		return kc, false
	}
	kc.model, b = string(b[:ml]), b[ml:]
	dim, ok1 := next()
	k, ok2 := next()
	if !ok1 || !ok2 || dim == 0 || dim > maxDims || k == 0 || k > maxClusters || uint64(len(b)) < 4*dim*k {
		return kc, false
	}
	cent := make([]float32, dim*k)
	for i := range cent {
		cent[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	b = b[4*dim*k:]
	if kc.clusters, ok = search.ClustersOf(int(dim), cent); !ok {
		return kc, false
	}
	trained, ok1 := next()
	n, ok2 := next()
	if !ok1 || !ok2 || trained > math.MaxInt32 || n > uint64(len(b))/2 {
		return kc, false
	}
	kc.trained = int(trained)
	kc.sorted, kc.assign = make([]uint64, n), make([]int32, n)
	prev := uint64(0)
	for j := range kc.sorted {
		delta, ok1 := next()
		c, ok2 := next()
		if !ok1 || !ok2 || c >= k || (j > 0 && delta == 0) || prev+delta < prev {
			return kc, false
		}
		prev += delta
		kc.sorted[j], kc.assign[j] = prev, int32(c)
	}
	return kc, len(b) == 0
}

// saveClusters keeps clusters in the store (see clustersKey). A failure
// leaves them unkept, to be trained again at the next open.
func (s *Store) saveClusters(kept []byte) {
	err := s.write.do(func(t *txn) error {
		b, err := t.bucket(bucketVectors)
		if err != nil {
			return err
		}
		return b.Put(clustersKey, t.s.seal.seal(bucketVectors, clustersKey, kept))
	})
	if err != nil && s.log != nil {
		s.log.Warn("keeping the vectors' clusters failed: they are trained again at the next open",
			"op", "storage.clusters", "error", err)
	}
}

// Clustered reports whether the vector index is partitioned into clusters
// (see above): false for a store below clusterMin vectors, and while the
// clusters of a larger one train.
func (s *Store) Clustered() bool {
	s.vecs.mu.RLock()
	defer s.vecs.mu.RUnlock()
	return s.vecs.clusters != nil
}

// clusteredShortlist is shortlistSize for a clustered index, whose probed
// vectors are already the nearest twelfth.
const clusteredShortlist = 128
