package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
)

// TestListeningLineNamesADialableAddress binds every interface and checks
// the listening line names 127.0.0.1 with the bound port, which a client
// reaches, and that the log says the server is open to other machines.
func TestListeningLineNamesADialableAddress(t *testing.T) {
	for _, bind := range []string{"0.0.0.0:0", "[::]:0", ":0"} {
		t.Run(bind, func(t *testing.T) {
			if bind == "[::]:0" {
				ln, err := net.Listen("tcp", bind)
				if err != nil {
					t.Skip("no IPv6 here:", err)
				}
				ln.Close()
			}
			ctx, stop := context.WithCancel(t.Context())
			outR, outW := io.Pipe()
			stderr := &syncBuffer{}
			done := make(chan error, 1)
			go func() {
				err := run(ctx, []string{"serve", "--transport", "http", "--bind", bind, "--allow-remote",
					"--data-dir", t.TempDir()}, env{"MEMGATE_TOKEN": strings.Repeat("k", 32)}.get,
					strings.NewReader(""), outW, stderr)
				outW.Close()
				done <- err
			}()
			defer func() { stop(); <-done }()
			line, err := bufio.NewReader(outR).ReadString('\n')
			go io.Copy(io.Discard, outR)
			m := regexp.MustCompile(`^memgate listening on http://(127\.0\.0\.1:[1-9][0-9]*)/mcp\n$`).FindStringSubmatch(line)
			if err != nil || m == nil {
				t.Fatalf("listening line %q (%v); stderr %q", line, err, stderr.String())
			}
			c, err := net.Dial("tcp", m[1])
			if err != nil {
				t.Fatalf("dial %s: %v", m[1], err)
			}
			c.Close()
			if !strings.Contains(stderr.String(), "listening on all interfaces") {
				t.Fatalf("stderr %q", stderr.String())
			}
		})
	}
}
