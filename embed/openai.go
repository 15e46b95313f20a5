package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memgate/memgate/search"
)

// OpenAI bounds.
const (
	// openAIBatch is the most texts in one request.
	openAIBatch = 64
	// openAIBatchBytes bounds the texts of one request.
	openAIBatchBytes = 256 << 10
	// openAITextBytes bounds one text: an embedding model reads a few
	// hundred tokens at most, and the rest would only cost the request.
	openAITextBytes = 8 << 10
	// openAIConcurrency is the most requests in flight at once.
	openAIConcurrency = 4
	// openAIAnswerBytes bounds an answer.
	openAIAnswerBytes = 64 << 20
	// openAIRetries is how many times a failed request is tried again.
	openAIRetries = 2
	// openAIFailsToRest is how many calls in a row may find the endpoint
	// unreachable or too slow before it rests (openAIRest).
	openAIFailsToRest = 3
)

// openAIRest is how long an endpoint that failed openAIFailsToRest calls in
// a row rests: calls fail at once, as the last one did, rather than each
// wait out its timeout; then one call tries it again. A variable for tests.
var openAIRest = 5 * time.Second

// OpenAI embeds through an OpenAI-compatible /v1/embeddings endpoint
// (OpenAI, Ollama, TEI, vLLM). Requests are batched, bounded in size and
// concurrency, and retried with backoff within the caller's context; a
// server that cannot be reached is search.ErrUnavailable. The key is sent
// as a bearer token and never logged. It is safe for concurrent use.
type OpenAI struct {
	url    string
	model  string
	key    string
	client *http.Client
	slots  chan struct{}
	dim    atomic.Int64

	mu     sync.Mutex
	fails  int       // calls in a row that found the endpoint unreachable or too slow
	last   error     // the last of them
	rest   time.Time // until when calls fail at once
	trying bool      // a call tries the endpoint again after a rest
}

// NewOpenAI returns an embedder for the endpoint at base (a URL ending in
// /v1/embeddings, /v1, or the server's root) and model. timeout bounds each
// request; key, if not empty, is the bearer token.
func NewOpenAI(base, model, key string, timeout time.Duration) *OpenAI {
	u := strings.TrimRight(base, "/")
	switch {
	case strings.HasSuffix(u, "/embeddings"):
	case strings.HasSuffix(u, "/v1"):
		u += "/embeddings"
	default:
		u += "/v1/embeddings"
	}
	return &OpenAI{url: u, model: model, key: key, client: &http.Client{Timeout: timeout},
		slots: make(chan struct{}, openAIConcurrency)}
}

// Model is the model's name and, once the endpoint has answered, its
// dimensions as the version: the endpoint does not say more.
func (o *OpenAI) Model() (string, string) {
	if d := o.dim.Load(); d > 0 {
		return o.model, strconv.FormatInt(d, 10) + "d"
	}
	return o.model, ""
}

// Embed returns a unit vector per text (nil for an empty text). After
// openAIFailsToRest calls in a row found the endpoint unreachable or too
// slow, it rests: calls fail at once with the last one's error (so a
// search answers lexically, and a write goes without a vector, without
// waiting), until one call, once openAIRest has passed, finds it back.
func (o *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := o.resting(); err != nil {
		return nil, err
	}
	out, err := o.embed(ctx, texts)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.trying = false
	switch {
	case err == nil || ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		// An answer, or a caller that went away: nothing learnt of a failure.
		if err == nil {
			o.fails = 0
		}
	case errors.Is(err, search.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded):
		o.fails++
		o.last = err
		if o.fails >= openAIFailsToRest {
			o.rest = time.Now().Add(openAIRest)
		}
	default:
		o.fails = 0 // it answered, if not well
	}
	return out, err
}

// resting is the error of a call while the endpoint rests, nil when the
// call may try it.
func (o *OpenAI) resting() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fails < openAIFailsToRest {
		return nil
	}
	if o.trying || time.Now().Before(o.rest) {
		return fmt.Errorf("%w (the endpoint rests after %d failures in a row)", o.last, o.fails)
	}
	o.trying = true
	return nil
}

func (o *OpenAI) embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for start := 0; start < len(texts); {
		end, size := start, 0
		for end < len(texts) && end-start < openAIBatch {
			n := min(len(texts[end]), openAITextBytes)
			if end > start && size+n > openAIBatchBytes {
				break
			}
			size += n
			end++
		}
		if err := o.batch(ctx, texts[start:end], out[start:end]); err != nil {
			return nil, err
		}
		start = end
	}
	return out, nil
}

type embeddingRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

type embeddingAnswer struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
}

// errAnswer is an answer that is not a good one; it is retried only when
// the server said it may be (5xx, 429).
type errAnswer struct {
	status int
}

func (e errAnswer) Error() string { return "embed: the endpoint answered " + strconv.Itoa(e.status) }

// Unwrap makes an answer that says the service cannot serve (502, 503,
// 504: down, overloaded, or behind a gateway that cannot reach it)
// search.ErrUnavailable, as an endpoint that cannot be reached is.
func (e errAnswer) Unwrap() error {
	switch e.status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return search.ErrUnavailable
	}
	return nil
}

func (o *OpenAI) batch(ctx context.Context, texts []string, out [][]float32) error {
	input := make([]string, 0, len(texts))
	at := make([]int, 0, len(texts))
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			continue
		}
		if len(t) > openAITextBytes {
			t = cutUTF8(t, openAITextBytes)
		}
		input = append(input, t)
		at = append(at, i)
	}
	if len(input) == 0 {
		return nil
	}
	body, err := json.Marshal(embeddingRequest{Model: o.model, Input: input})
	if err != nil {
		return err
	}
	select {
	case o.slots <- struct{}{}:
		defer func() { <-o.slots }()
	case <-ctx.Done():
		return ctx.Err()
	}
	backoff := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		vecs, err := o.call(ctx, body, len(input))
		if err == nil {
			for j, v := range vecs {
				out[at[j]] = v
			}
			return nil
		}
		var ans errAnswer
		retry := !errors.As(err, &ans) || ans.status >= 500 || ans.status == http.StatusTooManyRequests
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), err)
		}
		if !retry || attempt == openAIRetries {
			return err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff *= 2
	}
}

func (o *OpenAI) call(ctx context.Context, body []byte, n int) ([][]float32, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if o.key != "" {
		req.Header.Set("Authorization", "Bearer "+o.key)
	}
	resp, err := o.client.Do(req)
	if err != nil {
		if ctx.Err() != nil || isTimeout(err) {
			return nil, context.DeadlineExceeded
		}
		// The URL error names the URL only, never the key.
		return nil, fmt.Errorf("%w: %v", search.ErrUnavailable, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return nil, errAnswer{status: resp.StatusCode}
	}
	var ans embeddingAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, openAIAnswerBytes)).Decode(&ans); err != nil {
		if isTimeout(err) {
			return nil, context.DeadlineExceeded
		}
		return nil, fmt.Errorf("embed: a malformed answer: %w", err)
	}
	if len(ans.Data) != n {
		return nil, fmt.Errorf("embed: %d vectors for %d texts", len(ans.Data), n)
	}
	out := make([][]float32, n)
	dim := 0
	for _, d := range ans.Data {
		if d.Index < 0 || d.Index >= n || out[d.Index] != nil || len(d.Embedding) == 0 {
			return nil, errors.New("embed: an answer out of order")
		}
		if dim == 0 {
			dim = len(d.Embedding)
		}
		if len(d.Embedding) != dim {
			return nil, errors.New("embed: vectors of several sizes")
		}
		if search.Normalise(d.Embedding) {
			out[d.Index] = d.Embedding
		} else {
			out[d.Index] = nil
		}
	}
	o.dim.Store(int64(dim))
	return out, nil
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &t) && t.Timeout()
}

// cutUTF8 cuts s to at most n bytes at a rune boundary.
func cutUTF8(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
