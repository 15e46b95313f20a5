package embed

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/search"
)

// endpoint is an OpenAI-compatible embeddings server: each text's vector is
// (its length, 1, 0), and status, when set, answers the next requests.
type endpoint struct {
	calls, texts atomic.Int64
	status       atomic.Int64 // answer this many failures first
	failWith     int
	delay        atomic.Int64 // a time.Duration each answer waits first
	srv          *httptest.Server
}

func newEndpoint(t *testing.T) *endpoint {
	e := &endpoint{failWith: http.StatusServiceUnavailable}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.calls.Add(1)
		if r.URL.Path != "/v1/embeddings" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "wrong path or key", http.StatusNotFound)
			return
		}
		if e.status.Load() > 0 {
			e.status.Add(-1)
			http.Error(w, "busy", e.failWith)
			return
		}
		if d := time.Duration(e.delay.Load()); d > 0 {
			time.Sleep(d)
		}
		var req embeddingRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "m" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		e.texts.Add(int64(len(req.Input)))
		type datum struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var ans struct {
			Data []datum `json:"data"`
		}
		// Answered in reverse order: the index decides.
		for i := len(req.Input) - 1; i >= 0; i-- {
			ans.Data = append(ans.Data, datum{i, []float32{float32(len(req.Input[i])), 1, 0}})
		}
		json.NewEncoder(w).Encode(ans)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func TestOpenAIBatchesAndNormalises(t *testing.T) {
	e := newEndpoint(t)
	o := NewOpenAI(e.srv.URL, "m", "k", time.Second)
	texts := make([]string, 100)
	for i := range texts {
		texts[i] = strings.Repeat("x", i+1)
	}
	texts[7] = "  " // nothing to embed: no vector, not sent
	vecs, err := o.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if e.calls.Load() != 2 || e.texts.Load() != 99 {
		t.Errorf("%d requests of %d texts, want 2 of 99 (batches of 64)", e.calls.Load(), e.texts.Load())
	}
	if vecs[7] != nil {
		t.Error("a blank text got a vector")
	}
	for _, i := range []int{0, 63, 64, 99} {
		v := vecs[i]
		want := float64(i+1) / math.Hypot(float64(i+1), 1)
		if math.Abs(float64(v[0])-want) > 1e-6 {
			t.Errorf("text %d: vector %v, want its own, of unit length", i, v)
		}
	}
	if name, version := o.Model(); name != "m" || version != "3d" {
		t.Errorf("Model() = %q, %q", name, version)
	}
}

func TestOpenAIRetriesAndFails(t *testing.T) {
	ctx := context.Background()
	e := newEndpoint(t)
	o := NewOpenAI(e.srv.URL+"/v1", "m", "k", time.Second)
	e.status.Store(2) // two 503s, then an answer
	if _, err := o.Embed(ctx, []string{"a"}); err != nil || e.calls.Load() != 3 {
		t.Errorf("after two 503s: %v, %d calls; want an answer at the third", err, e.calls.Load())
	}
	e.status.Store(3)
	if _, err := o.Embed(ctx, []string{"a"}); !errors.Is(err, search.ErrUnavailable) {
		t.Errorf("three 503s: %v, want ErrUnavailable (the service said so)", err)
	}
	e.failWith = http.StatusBadRequest
	e.status.Store(1)
	before := e.calls.Load()
	if _, err := o.Embed(ctx, []string{"a"}); err == nil || errors.Is(err, search.ErrUnavailable) || e.calls.Load() != before+1 {
		t.Errorf("a 400: %v after %d calls; want an error of the answer, and no retry", err, e.calls.Load()-before)
	}

	e.delay.Store(int64(300 * time.Millisecond))
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := o.Embed(short, []string{"a"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a slow endpoint: %v, want a timeout", err)
	}

	e.srv.Close()
	if _, err := o.Embed(ctx, []string{"a"}); !errors.Is(err, search.ErrUnavailable) || strings.Contains(err.Error(), "Bearer") {
		t.Errorf("a closed endpoint: %v, want ErrUnavailable (and no key)", err)
	}
}

// An endpoint that several calls in a row found too slow, or could not
// reach, rests: calls fail at once with the same reason, without asking
// it, until one call after the rest finds it back.
func TestOpenAIRestsAfterFailuresInARow(t *testing.T) {
	defer func(d time.Duration) { openAIRest = d }(openAIRest)
	openAIRest = 200 * time.Millisecond
	e := newEndpoint(t)
	o := NewOpenAI(e.srv.URL+"/v1", "m", "k", time.Second)
	e.delay.Store(int64(200 * time.Millisecond))
	call := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := o.Embed(ctx, []string{"a"})
		return err
	}
	for i := range openAIFailsToRest {
		if err := call(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("slow call %d: %v", i, err)
		}
	}
	asked := e.calls.Load()
	for range 5 {
		if err := call(); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "rests") {
			t.Fatalf("a call while the endpoint rests: %v, want the timeout again", err)
		}
	}
	if e.calls.Load() != asked {
		t.Fatalf("the resting endpoint was asked %d times", e.calls.Load()-asked)
	}
	e.delay.Store(0)
	time.Sleep(2 * openAIRest)
	if err := call(); err != nil || e.calls.Load() != asked+1 {
		t.Fatalf("after the rest: %v, %d calls", err, e.calls.Load()-asked)
	}
	if err := call(); err != nil {
		t.Fatalf("back: %v", err)
	}
}
