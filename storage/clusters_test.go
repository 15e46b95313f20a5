package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/memgate/memgate"

	"github.com/memgate/memgate/search"
)

// trainNow trains the clusters of s's index and waits for them.
func trainNow(t testing.TB, s *Store) {
	t.Helper()
	ix := &s.vecs
	if ix.stop == nil {
		ix.stop = context.Background()
	}
	ix.mu.Lock()
	ix.maybeTrain()
	ix.mu.Unlock()
	ix.trainers.Wait()
	if ix.clusters == nil {
		t.Fatal("the index did not train its clusters")
	}
}

// checkMembers checks that every vector is a member of exactly one
// cluster, the one where and whereC say, with its residual code.
func checkMembers(t *testing.T, ix *vecIndex) {
	t.Helper()
	words := search.SignWords(ix.dim)
	seen := make([]bool, len(ix.docs))
	for c, m := range ix.members {
		if len(m.signs) != len(m.slots)*words || len(m.alpha) != len(m.slots) {
			t.Fatalf("cluster %d: %d signs for %d members", c, len(m.signs), len(m.slots))
		}
		for p, slot := range m.slots {
			if int(slot) >= len(ix.docs) || seen[slot] {
				t.Fatalf("cluster %d: slot %d out of range or in two places", c, slot)
			}
			seen[slot] = true
			if ix.whereC[slot] != int32(c) || ix.where[slot] != int32(p) {
				t.Fatalf("slot %d: at %d/%d, where says %d/%d", slot, c, p, ix.whereC[slot], ix.where[slot])
			}
			row := ix.rows[int(slot)*ix.stride() : (int(slot)+1)*ix.stride()]
			code, alpha := search.AppendResidual(nil, rowNumbers(row), rowScale(row), ix.clusters.Centroid(c))
			if !slices.Equal(m.signs[p*words:(p+1)*words], code) || m.alpha[p] != alpha {
				t.Fatalf("slot %d: its code in cluster %d is not its vector's", slot, c)
			}
		}
	}
	for slot, ok := range seen {
		if !ok {
			t.Fatalf("slot %d is in no cluster", slot)
		}
	}
}

func TestClusteredIndexFindsEachVectorAndStaysInStep(t *testing.T) {
	s, queries := randomIndex(clusterMin, 100)
	ix := &s.vecs
	trainNow(t, s)
	if k := ix.clusters.K(); k != clusterCount(clusterMin) {
		t.Fatalf("%d clusters, want %d", k, clusterCount(clusterMin))
	}
	checkMembers(t, ix)
	step := clusterMin / 16
	for i, q := range queries {
		near := s.semanticScan(q, 10, 1<<62, probeDivisor)
		if len(near) == 0 || near[0].Doc != uint64(i*step+1) || near[0].Score < 0.99 {
			t.Fatalf("query %d: nearest %v, want document %d at about 1", i, near[:min(len(near), 1)], i*step+1)
		}
	}
	// Forget some, write some, and replace the vector of others: the
	// clusters follow, and a replaced vector is found under its new value.
	for doc := uint64(1); doc <= uint64(clusterMin); doc += 7 {
		ix.remove(doc)
	}
	for doc := uint64(clusterMin + 1); doc <= uint64(clusterMin)+500; doc++ {
		ix.add(doc, vectorOf(queries[int(doc)%len(queries)], "m"))
	}
	moved := queries[3]
	ix.add(2, vectorOf(moved, "m"))
	checkMembers(t, ix)
	near := s.semanticScan(moved, 600, 1<<62, probeDivisor)
	found := false
	for _, n := range near {
		found = found || n.Doc == 2
	}
	if !found {
		t.Fatal("a vector replaced in place is not found under its new value")
	}
}

func TestTrainingOfAnEarlierLoadIsDropped(t *testing.T) {
	s, _ := randomIndex(clusterMin, 16)
	ix := &s.vecs
	ix.stop = context.Background()
	ix.mu.Lock()
	ix.maybeTrain()
	ix.gen++ // as a reload does, before the training ends
	ix.mu.Unlock()
	ix.trainers.Wait()
	if ix.clusters != nil || ix.training {
		t.Fatal("the clusters of an earlier load were installed")
	}
}

// A training that panics (a bug) leaves its store scanning every vector,
// and the process up.
func TestTrainingThatPanicsLeavesTheWholeScan(t *testing.T) {
	s, queries := randomIndex(clusterMin, 16)
	ix := &s.vecs
	ix.stop = context.Background()
	defer func(train func(context.Context, []int8, int, int, int) (*search.Clusters, error)) {
		trainClusters = train
	}(trainClusters)
	trainClusters = func(context.Context, []int8, int, int, int) (*search.Clusters, error) {
		var none []int
		return nil, fmt.Errorf("%d", none[1]) // index out of range
	}
	ix.mu.Lock()
	ix.maybeTrain()
	ix.mu.Unlock()
	ix.trainers.Wait()
	if ix.clusters != nil || ix.training {
		t.Fatal("a training that panicked left clusters, or still trains")
	}
	if near := s.semanticScan(queries[1], 5, 1<<62, probeDivisor); len(near) == 0 || near[0].Doc != uint64(clusterMin/16+1) {
		t.Fatalf("after the panic, the scan found %v", near)
	}
}

func TestTrainingStopsWithTheStore(t *testing.T) {
	s, _ := randomIndex(clusterMin, 16)
	ix := &s.vecs
	ctx, cancel := context.WithCancel(context.Background())
	ix.stop = ctx
	cancel()
	ix.mu.Lock()
	ix.maybeTrain()
	ix.mu.Unlock()
	ix.trainers.Wait()
	if ix.clusters != nil {
		t.Fatal("a stopped store trained its clusters")
	}
}

func TestSmallIndexIsScannedWhole(t *testing.T) {
	s, _ := randomIndex(clusterMin-1, 16)
	ix := &s.vecs
	ix.stop = context.Background()
	ix.mu.Lock()
	ix.maybeTrain()
	ix.mu.Unlock()
	ix.trainers.Wait()
	if ix.clusters != nil || ix.training {
		t.Fatalf("an index of %d vectors, one below the bound, was clustered", clusterMin-1)
	}
	s, _ = randomIndex(clusterMin, 16)
	trainNow(t, s)
}

// BenchmarkSemanticScanClustered is BenchmarkSemanticScan once the index
// is clustered: the clusters nearest the query until a sixteenth of the
// vectors, their residual codes, the exact scores of 128.
func BenchmarkSemanticScanClustered(b *testing.B) {
	s, queries := randomIndex(100000, 100)
	trainNow(b, s)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.semanticScan(queries[i%len(queries)], 66, 1<<62, probeDivisor)
		i++
	}
}

// A store past the bound trains its clusters in the background and keeps
// answering: hybrid searches find by meaning before and after, a forgotten
// memory is not found, a new one is, and closing the store ends a training.
func TestStoreClustersItsVectorsAndKeepsAnswering(t *testing.T) {
	defer SetClusterMin(64)()
	s := openTest(t, func(o *Options) { o.Embedder = fixture(t) })
	topics := []string{"new car bought in spring", "the doctor said my blood pressure", "a cabin by the lake for the holiday", "the invoice payment and its price"}
	var car memgate.Memory
	for i := range 200 {
		m := put(t, s, memgate.Write{Text: fmt.Sprintf("%s, note %d", topics[i%len(topics)], i)})
		if i == 0 {
			car = m
		}
	}
	for began := time.Now(); !s.Clustered(); time.Sleep(5 * time.Millisecond) {
		if time.Since(began) > 30*time.Second {
			t.Fatal("200 vectors past a bound of 64 were not clustered")
		}
	}
	checkMembers(t, &s.vecs)
	res := search1(t, s, memgate.Query{Text: "automobile", Limit: 50})
	if res.Receipt.RetrievalMode != memgate.RetrievalHybrid || len(res.Hits) == 0 {
		t.Fatalf("a clustered hybrid search: mode %q, %d hits", res.Receipt.RetrievalMode, len(res.Hits))
	}
	for _, h := range res.Hits {
		if !strings.Contains(h.Text, "car") {
			t.Fatalf("%q found for automobile", h.Text)
		}
	}
	if err := s.Delete(context.Background(), car.ID, nil); err != nil {
		t.Fatal(err)
	}
	fresh := put(t, s, memgate.Write{Text: "a new automobile"})
	res = search1(t, s, memgate.Query{Text: "automobile", Limit: 100})
	seen := map[string]bool{}
	for _, h := range res.Hits {
		seen[h.ID] = true
	}
	if seen[car.ID] || !seen[fresh.ID] {
		t.Fatalf("after a forget and a write: forgotten found %v, new found %v", seen[car.ID], seen[fresh.ID])
	}
	checkMembers(t, &s.vecs)
}

// A memory BM25 ranks joins the semantic list with its exact cosine when
// the scan missed it, in its place; one already there, or below the floor,
// is not added again.
func TestLexicalCandidatesJoinTheSemanticList(t *testing.T) {
	s, queries := randomIndex(2000, 16)
	q := queries[3]
	near := s.semanticScan(q, 10, 1<<62, probeDivisor)
	if len(near) < 3 {
		t.Fatalf("%d near", len(near))
	}
	missed := near[1]
	short := slices.Delete(slices.Clone(near), 1, 2)
	far := uint64(0)
	for doc := uint64(1); doc <= 2000 && far == 0; doc++ {
		if c, _ := s.cosine(doc, q); c < search.CosineFloor {
			far = doc
		}
	}
	got := s.withCosines(short, []search.Scored{{Doc: near[0].Doc}, {Doc: missed.Doc}, {Doc: far}}, q)
	if len(got) != len(near) || got[1].Doc != missed.Doc || math.Abs(got[1].Score-missed.Score) > 1e-9 {
		t.Fatalf("joined %v, want %v", got, near)
	}
}

// Writers, forgets and hybrid searches go on while the clusters train and
// after: every search answers, and the clusters stay in step with the
// index (run under -race by make test).
func TestClustersTrainWhileTheStoreIsBusy(t *testing.T) {
	defer SetClusterMin(64)()
	s := openTest(t, func(o *Options) { o.Embedder = fixture(t) })
	ctx := context.Background()
	words := []string{"car", "doctor", "holiday", "invoice", "lake", "payment", "automobile", "physician"}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 2 {
		wg.Go(func() {
			for i := range 150 {
				m, _, err := s.Put(ctx, memgate.Write{Text: fmt.Sprintf("%s and %s, %d/%d", words[i%8], words[(i+w)%8], w, i)})
				if err != nil {
					errs <- err
					return
				}
				if i%10 == 0 {
					if err := s.Delete(ctx, m.ID, nil); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 300 {
			if _, err := s.Search(ctx, memgate.Query{Text: words[i%8], Limit: 10}); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for began := time.Now(); !s.Clustered(); time.Sleep(5 * time.Millisecond) {
		if time.Since(began) > 30*time.Second {
			t.Fatal("not clustered")
		}
	}
	s.vecs.mu.RLock()
	checkMembers(t, &s.vecs)
	s.vecs.mu.RUnlock()
}

// A search that asks for more (one with a filter, which leaves most out)
// gets more from a clustered index than its usual shortlist holds.
func TestClusteredShortlistGrowsWithWhatIsAsked(t *testing.T) {
	s := &Store{}
	ix := &s.vecs
	ix.dim, ix.slot, ix.blank = 16, map[uint64]int{}, map[uint64]bool{}
	r := rand.New(rand.NewPCG(7, 8))
	unit := func(around []float32, noise float64) []float32 {
		v := make([]float32, ix.dim)
		for j := range v {
			v[j] = float32(r.NormFloat64() * noise)
			if around != nil {
				v[j] += around[j]
			}
		}
		search.Normalise(v)
		return v
	}
	topic := unit(nil, 1)
	for doc := range clusterMin {
		v := unit(nil, 1)
		if doc%8 == 0 {
			v = unit(topic, 0.05) // 2,048 memories on one topic
		}
		ix.add(uint64(doc+1), vectorOf(v, "m"))
	}
	trainNow(t, s)
	if n := len(s.semanticScan(topic, 66, 1<<62, probeDivisor)); n != 66 {
		t.Fatalf("asked for 66, got %d", n)
	}
	if n := len(s.semanticScan(topic, 4*50+16, 1<<62, probeDivisor)); n != 216 {
		t.Fatalf("asked for 216 (a filtered search's), got %d", n)
	}
}

// Stores that reach the bound at once train in turn, and each gets its
// clusters; a store closed while it waits its turn stops waiting.
func TestStoresTrainInTurn(t *testing.T) {
	a, _ := randomIndex(clusterMin, 16)
	b, _ := randomIndex(clusterMin, 16)
	c, _ := randomIndex(clusterMin, 16)
	stopped, stop := context.WithCancel(context.Background())
	for _, s := range []*Store{a, b, c} {
		s.vecs.stop = context.Background()
	}
	c.vecs.stop = stopped
	trainings <- struct{}{} // another store's training holds the turn
	for _, s := range []*Store{a, b, c} {
		s.vecs.mu.Lock()
		s.vecs.maybeTrain()
		s.vecs.mu.Unlock()
	}
	stop()
	c.vecs.trainers.Wait() // c stops waiting without its turn
	<-trainings
	a.vecs.trainers.Wait()
	b.vecs.trainers.Wait()
	if !a.Clustered() || !b.Clustered() || c.Clustered() {
		t.Fatalf("clustered: a %v, b %v, c (stopped) %v", a.Clustered(), b.Clustered(), c.Clustered())
	}
}

// hashed embeds each text as a unit vector of 16 numbers drawn from a
// generator seeded by the text: the same text, the same vector.
type hashed struct{}

func (hashed) Model() (string, string) { return "hashed", "1" }

func (hashed) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, text := range texts {
		h := fnv.New64a()
		h.Write([]byte(text))
		r := rand.New(rand.NewPCG(h.Sum64(), 1))
		v := make([]float32, 16)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		search.Normalise(v)
		out[i] = v
	}
	return out, nil
}

// The clusters a training made are kept in the store: the next open uses
// them, trains nothing, and answers as before; kept clusters that are
// damaged are trained again, and the store opens as ever. Plain and
// encrypted.
func TestKeptClustersAreUsedAtTheNextOpen(t *testing.T) {
	defer func(n int) { clusterMin = n }(clusterMin)
	clusterMin = 300
	for _, encrypted := range []bool{false, true} {
		t.Run(fmt.Sprint("encrypted ", encrypted), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			opts := Options{NoSync: true, Embedder: hashed{}}
			if encrypted {
				opts.Encryption = encryption(t, "a passphrase")
			}
			s, err := Open(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			const n = 400
			for i := range n {
				put(t, s, memgate.Write{Text: fmt.Sprint("memory number ", i)})
			}
			waitEmbedded(t, s, n)
			waitClustered(t, s)
			s.vecs.trainers.Wait() // the training goroutine keeps them after installing them
			queries := []memgate.Query{{Text: "memory number 7"}, {Text: "number 123 memory", Limit: 10}, {Text: "something else"}}
			before := make([][]memgate.Hit, len(queries))
			for i, q := range queries {
				before[i] = search1(t, s, q).Hits
			}
			k := s.vecs.clusters.K()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			// Opened again: the kept clusters, no training.
			defer func(train func(context.Context, []int8, int, int, int) (*search.Clusters, error)) {
				trainClusters = train
			}(trainClusters)
			trainClusters = func(ctx context.Context, q []int8, dim, k, rounds int) (*search.Clusters, error) {
				t.Error("the clusters were trained again")
				return search.TrainClusters(ctx, q, dim, k, rounds)
			}
			s, err = Open(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			waitEmbedded(t, s, n)
			if s.Embedded() != n || !s.Clustered() || s.vecs.clusters.K() != k {
				t.Fatalf("reopened: clustered %v, want the %d kept clusters", s.Clustered(), k)
			}
			checkMembers(t, &s.vecs)
			for i, q := range queries {
				if got := search1(t, s, q).Hits; !sameIDs(got, before[i]) {
					t.Errorf("%q after the reopen: %v, before %v", q.Text, texts(got), texts(before[i]))
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			// Damaged: ignored, and trained again.
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				b := tx.Bucket(bucketVectors)
				kept := b.Get(clustersKey)
				if kept == nil {
					return errors.New("no clusters kept")
				}
				return b.Put(clustersKey, append(bytes.Clone(kept[:len(kept)/2]), "damage"...))
			})
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			trainings := 0
			trainClusters = func(ctx context.Context, q []int8, dim, k, rounds int) (*search.Clusters, error) {
				trainings++
				return search.TrainClusters(ctx, q, dim, k, rounds)
			}
			s, err = Open(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			waitEmbedded(t, s, n)
			waitClustered(t, s)
			s.vecs.trainers.Wait()
			if trainings != 1 {
				t.Fatalf("damaged kept clusters: %d trainings, want 1", trainings)
			}
			if got := search1(t, s, queries[0]).Hits; len(got) == 0 || got[0].ID != before[0][0].ID {
				t.Fatalf("after the damaged clusters: %v", texts(got))
			}
		})
	}
}

func waitClustered(t *testing.T, s *Store) {
	t.Helper()
	for began := time.Now(); !s.Clustered(); time.Sleep(5 * time.Millisecond) {
		if time.Since(began) > 20*time.Second {
			t.Fatal("no clusters after 20 s")
		}
	}
}

// The kept form reads back as it was written, and any cut of it, or any
// bit of it flipped, is refused without a panic.
func TestKeptClustersFormat(t *testing.T) {
	cent := []float32{1, 0, 0, 1, 0.6, 0.8}
	c, ok := search.ClustersOf(2, cent)
	if !ok {
		t.Fatal("ClustersOf refused three centroids of two numbers")
	}
	sorted, assign := []uint64{3, 9, 1 << 40}, []int32{2, 0, 1}
	b := marshalClusters("m@1", c, 17, sorted, assign)
	kc, ok := unmarshalClusters(b)
	if !ok || kc.model != "m@1" || kc.trained != 17 || !slices.Equal(kc.sorted, sorted) || !slices.Equal(kc.assign, assign) ||
		!slices.Equal(kc.clusters.Centroids(), cent) {
		t.Fatalf("read back: %+v %v", kc, ok)
	}
	for i := range len(b) {
		if _, ok := unmarshalClusters(b[:i]); ok {
			t.Fatalf("a cut at %d of %d bytes was read", i, len(b))
		}
		for bit := range 8 { // the model, a centroid, a document: any bit flipped
			flipped := slices.Clone(b)
			flipped[i] ^= 1 << bit
			if _, ok := unmarshalClusters(flipped); ok {
				t.Fatalf("bit %d of byte %d of %d flipped was read", bit, i, len(b))
			}
		}
	}
	for _, bad := range [][]byte{
		marshalClusters("m@1", c, 17, []uint64{3, 3}, []int32{0, 0}), // a document twice
		marshalClusters("m@1", c, 17, []uint64{3}, []int32{3}),       // no such cluster
		append(b, 0),
		append([]byte{9}, b[1:]...), // another format
	} {
		if _, ok := unmarshalClusters(bad); ok {
			t.Fatalf("%x was read", bad)
		}
	}
	if _, ok := search.ClustersOf(2, []float32{1, 0, float32(math.NaN()), 1}); ok {
		t.Fatal("a centroid of NaN was taken")
	}
}
