package gateway

import (
	"bytes"
	"net/http"

	"github.com/memgate/memgate/server"
)

// A tool's result is JSON twice over (the structured content, and the same
// JSON as text), and the SDK's streamable handler encodes it with
// encoding/json, which compacts every layer again: a 10 KB search answer is
// scanned three times after it was written. So bindWork, the outermost
// middleware of the gateway's SDK servers, encodes a tools/call's result
// once (server.EncodeResult, byte for byte json.Marshal's, which is what the
// SDK writes), keeps it with the request's work, and hands the SDK a
// placeholder; the answerWriter the handler writes through puts the kept
// bytes where the SDK's answer has the placeholder's. The answer a client
// reads is the one the SDK would have written.

// placeholderResult is the SDK's encoding of the placeholder as the result
// of an answer.
var placeholderResult = append([]byte(`"result":`), server.PlaceholderJSON()...)

// answerWriter is the ResponseWriter the SDK's handler answers a request
// through: see above.
type answerWriter struct {
	http.ResponseWriter
	g  *Gateway
	id string // the request's work
}

// answers returns the writer through which the SDK answers r on w.
func (g *Gateway) answers(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	id := r.Header.Get(workHeader)
	if id == "" {
		return w
	}
	return &answerWriter{ResponseWriter: w, g: g, id: id}
}

func (a *answerWriter) Write(b []byte) (int, error) {
	i := bytes.Index(b, placeholderResult)
	if i < 0 {
		return a.ResponseWriter.Write(b)
	}
	v, ok := a.g.works.Load(a.id)
	if !ok {
		return a.ResponseWriter.Write(b)
	}
	answer := v.(*work).take()
	if answer == nil {
		return a.ResponseWriter.Write(b)
	}
	at := i + len(`"result":`)
	end := at + len(placeholderResult) - len(`"result":`)
	out := make([]byte, 0, len(b)-(end-at)+len(answer))
	out = append(append(append(out, b[:at]...), answer...), b[end:]...)
	if _, err := a.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Unwrap gives http.ResponseController the writer underneath, for the
// SDK's flushes and deadlines.
func (a *answerWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }
