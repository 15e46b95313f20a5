package storage

import (
	"fmt"
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
// index has doubled since, and at every load (they are not stored: a load
// of 100,000 vectors is followed by a few seconds of training on one core).
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
	defer ix.mu.Unlock()
	if ix.gen != gen || ix.dim != dim {
		return // reloaded meanwhile, perhaps for another model
	}
	ix.clusters, ix.trained = clusters, n
	ix.members = make([]clusterMembers, clusters.K())
	ix.where, ix.whereC = make([]int32, len(ix.docs)), make([]int32, len(ix.docs))
	for i, doc := range ix.docs {
		c := 0
		if j, ok := slices.BinarySearch(sorted, doc); ok {
			c = int(assign[j])
		} else {
			// Written since the copy.
			c = clusters.Nearest8(rowNumbers(ix.rows[i*ix.stride() : (i+1)*ix.stride()]))
		}
		ix.join(i, c)
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
