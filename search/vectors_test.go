package search

import (
	"math"
	"slices"
	"testing"
)

func table(t *testing.T) *Vectors {
	t.Helper()
	v := NewVectors(3, 8)
	for i, w := range []struct {
		word string
		vec  []float32
	}{
		{"car", []float32{1, 0, 0}},
		{"automobile", []float32{0.9, 0.1, 0}},
		{"doctor", []float32{0, 2, 0}}, // not unit: Add normalises
		{"physician", []float32{0, 0.9, 0.1}},
		{"parse", []float32{0, 0, 1}},
		{"request", []float32{0, 1, 1}},
	} {
		if !v.Add(w.word, w.vec, i) {
			t.Fatalf("Add(%q) refused", w.word)
		}
	}
	return v
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func TestVectorsAddNormalisesAndRefuses(t *testing.T) {
	v := table(t)
	if got := v.Lookup("doctor"); !slices.Equal(got, []float32{0, 1, 0}) {
		t.Errorf("doctor = %v, want the unit vector [0 1 0]", got)
	}
	if v.Add("car", []float32{0, 1, 0}, 9) {
		t.Error("a word added twice was accepted")
	}
	if v.Add("zero", []float32{0, 0, 0}, 9) || v.Add("short", []float32{1}, 9) {
		t.Error("a zero or short vector was accepted")
	}
	if v.Len() != 6 || v.Lookup("zero") != nil {
		t.Errorf("Len = %d, want 6", v.Len())
	}
}

func TestEmbedFindsSynonymsAndIdentifierParts(t *testing.T) {
	v := table(t)
	a, b := make([]float32, 3), make([]float32, 3)
	if n := v.Embed(a, "What car do I drive?"); n != 1 {
		t.Fatalf("Embed found %d words, want 1 (car)", n)
	}
	v.Embed(b, "Bought a new Automobile")
	if c := dot(a, b); c < 0.95 {
		t.Errorf("cos(car, automobile) = %.3f, want > 0.95", c)
	}
	v.Embed(b, "the physician said")
	if c := dot(a, b); c > 0.2 {
		t.Errorf("cos(car, physician) = %.3f, want near 0", c)
	}
	// parseRequest is the identifier and its two parts.
	if n := v.Embed(a, "parseRequest"); n != 2 {
		t.Errorf("Embed(parseRequest) found %d words, want its 2 parts", n)
	}
	if n := v.Embed(a, "the of and"); n != 0 || slices.ContainsFunc(a, func(x float32) bool { return x != 0 }) {
		t.Errorf("Embed of stop words found %d words, vector %v; want none, zero", n, a)
	}
}

func TestSIFWeighsRareWordsMore(t *testing.T) {
	v := NewVectors(2, 2)
	v.Add("common", []float32{1, 0}, 0)
	v.Add("rare", []float32{0, 1}, 100000)
	got := make([]float32, 2)
	v.Embed(got, "common rare")
	// weight(rank) = a/(a + 1/((rank+10)·ln(1.78·N))) with N = 2.
	h := math.Log(1.78 * 2)
	w := func(rank float64) float64 { return SIF / (SIF + 1/((rank+10)*h)) }
	wc, wr := w(0), w(100000)
	n := math.Hypot(wc, wr)
	if math.Abs(float64(got[0])-wc/n) > 1e-6 || math.Abs(float64(got[1])-wr/n) > 1e-6 {
		t.Errorf("Embed = %v, want [%.4f %.4f]", got, wc/n, wr/n)
	}
	if got[1] < 10*got[0] {
		t.Errorf("the rare word weighs %.4f, the common one %.4f: want the rare one far heavier", got[1], got[0])
	}
}

func TestEmbedDoesNotAllocate(t *testing.T) {
	v := table(t)
	dst := make([]float32, 3)
	v.Embed(dst, "warm up")
	if n := testing.AllocsPerRun(100, func() { v.Embed(dst, "parseRequest from the doctor's car") }); n != 0 {
		t.Errorf("Embed allocates %.0f times, want 0", n)
	}
}

func TestQuantizeKeepsCosine(t *testing.T) {
	a := []float32{0.6, -0.8, 0, 0}
	b := []float32{0.5, -0.5, 0.5, 0.5}
	q, scale := Quantize(nil, b)
	if len(q) != 4 || q[0] != 127 || q[1] != -127 {
		t.Fatalf("Quantize = %v (scale %g), want the largest magnitudes at ±127", q, scale)
	}
	got, want := float64(Dot8(a, q)*scale), dot(a, b)
	if math.Abs(got-want) > 0.01 {
		t.Errorf("quantised cosine %.4f, want %.4f within 0.01", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { Dot8(a, q) }); n != 0 {
		t.Errorf("Dot8 allocates %.0f times", n)
	}
	if z, s := Quantize(nil, []float32{0, 0}); s != 0 || len(z) != 2 {
		t.Errorf("Quantize(zero) = %v, %g", z, s)
	}
}

func TestVectorsFromChecksLengths(t *testing.T) {
	if _, ok := VectorsFrom(2, []string{"a"}, []int32{0}, []float32{1}); ok {
		t.Error("a short table was accepted")
	}
	if _, ok := VectorsFrom(1, []string{"a", "a"}, []int32{0, 1}, []float32{1, 1}); ok {
		t.Error("a word twice was accepted")
	}
	v, ok := VectorsFrom(1, []string{"a", "b"}, []int32{0, 1}, []float32{1, -1})
	if !ok || v.Lookup("b")[0] != -1 {
		t.Error("a good table was refused or misread")
	}
}

func BenchmarkDot8(b *testing.B) {
	x := make([]float32, 100)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	q, _ := Quantize(nil, x)
	for b.Loop() {
		Dot8(x, q)
	}
}
