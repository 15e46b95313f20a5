package search

import "math"

// CosineFloor is the least cosine similarity at which a memory enters the
// semantic ranking. Below it, text about something else would get a rank,
// and so a fused score, for free. With GloVe 100-d embedded as Vectors.Embed
// does, sentences on unrelated topics measure −0.2–0.16 and paraphrases
// 0.38–0.55.
const CosineFloor = 0.3

// A Quantized vector is a unit vector as int8 numbers and one scale: x[i] ≈
// Q[i]·Scale. A 100-dimension vector takes 104 bytes instead of 400, and a
// scan reads a quarter of the memory.
type Quantized struct {
	Scale float32
	Q     []int8
}

// Quantize appends the int8 form of vec to dst and returns it with the
// scale: the largest magnitude maps to 127.
func Quantize(dst []int8, vec []float32) ([]int8, float32) {
	var top float32
	for _, x := range vec {
		top = max(top, float32(math.Abs(float64(x))))
	}
	if top == 0 {
		for range vec {
			dst = append(dst, 0)
		}
		return dst, 0
	}
	scale := top / 127
	for _, x := range vec {
		dst = append(dst, int8(math.Round(float64(x/scale))))
	}
	return dst, scale
}

// Dot8 is the dot product of a float vector and a quantized one (without
// its scale). It does not allocate; q must be at least as long as a.
func Dot8(a []float32, q []int8) float32 {
	q = q[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * float32(q[i])
		s1 += a[i+1] * float32(q[i+1])
		s2 += a[i+2] * float32(q[i+2])
		s3 += a[i+3] * float32(q[i+3])
	}
	for ; i < len(a); i++ {
		s0 += a[i] * float32(q[i])
	}
	return s0 + s1 + s2 + s3
}
