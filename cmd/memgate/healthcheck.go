package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// healthcheckCmd probes a memgate serving HTTP on this machine: what a
// container's HEALTHCHECK runs, in an image that has no shell and no curl.
// Its --bind is serve's, from the same MEMGATE_BIND, so a container that
// moves its port needs no second setting.
type healthcheckCmd struct {
	Bind    string        `name:"bind" group:"http" default:"127.0.0.1:8765" placeholder:"HOST:PORT" help:"Address serve --transport http listens on; a listener on every interface is probed on 127.0.0.1."`
	Ready   bool          `name:"ready" help:"Probe GET /ready (stores can be opened, not shutting down) instead of GET /health (the process answers)."`
	Timeout time.Duration `name:"timeout" default:"3s" placeholder:"DURATION" help:"Time the probe may take."`
}

// Run sends one GET to /health (or /ready) and succeeds on 200. It prints
// nothing on success, and one line on stderr otherwise, with status 1.
func (c *healthcheckCmd) Run(a *app) error {
	if c.Timeout <= 0 {
		return usageError{errors.New("--timeout: must be a positive duration, such as 3s")}
	}
	url, err := probeURL(c.Bind, c.Ready)
	if err != nil {
		return usageError{err}
	}
	ctx, cancel := context.WithTimeout(a.ctx, c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return usageError{fmt.Errorf("--bind: %w", err)}
	}
	// No proxy from the environment: the probe is of this machine.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %s: %w", url, unwrapURLError(err))
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s: %s", url, resp.Status)
	}
	return nil
}

// probeURL is the URL of the probe of a server bound to bind: an
// unspecified host (every interface) becomes 127.0.0.1.
func probeURL(bind string, ready bool) (string, error) {
	host, port, err := net.SplitHostPort(bind)
	if err != nil {
		return "", errors.New("--bind: must be HOST:PORT, such as 127.0.0.1:8765")
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	path := "/health"
	if ready {
		path = "/ready"
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}

// unwrapURLError drops the *url.Error wrapping, which repeats the method
// and the URL that the caller already names.
func unwrapURLError(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}
