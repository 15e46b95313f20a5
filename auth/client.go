package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// rootCAs returns the trusted roots: the system's, or only the PEM
// certificates of caFile when one is given (a private CA).
func rootCAs(caFile string) (*x509.CertPool, error) {
	if caFile == "" {
		return nil, nil // the system roots
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", pathless(err))
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("CA file: no PEM certificate in it")
	}
	return pool, nil
}

// newClient returns an HTTP client for an identity service: TLS verified
// against roots (nil: the system's), at least TLS 1.2, redirects not
// followed (a 3xx is an answer, and a failure), timeout on the whole call,
// and the environment's proxy only when useProxy.
func newClient(roots *x509.CertPool, timeout time.Duration, useProxy bool) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		MaxIdleConnsPerHost:   maxIntrospections,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		DialContext:           (&net.Dialer{Timeout: timeout}).DialContext,
	}
	if useProxy {
		tr.Proxy = http.ProxyFromEnvironment
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// checkServiceURL checks the address of an identity service endpoint: an
// absolute https URL without user information or fragment; plain http only
// when allowLoopbackHTTP and the host is a loopback name or address (a
// JWKS served by a test or a sidecar on the same machine).
func checkServiceURL(raw string, allowLoopbackHTTP bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return nil, errors.New("must be an absolute https URL")
	}
	if u.User != nil || u.Fragment != "" {
		return nil, errors.New("must not hold user information or a fragment")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !allowLoopbackHTTP || !IsLoopbackHost(u.Hostname()) {
			return nil, errors.New("must use https (plain http only for 127.0.0.1, ::1 and localhost)")
		}
	default:
		return nil, errors.New("must be an absolute https URL")
	}
	return u, nil
}

// CheckServiceURL checks the address of an identity service: an absolute
// https URL without user information or fragment (plain http on a loopback
// host when allowLoopbackHTTP).
func CheckServiceURL(raw string, allowLoopbackHTTP bool) error {
	_, err := checkServiceURL(raw, allowLoopbackHTTP)
	return err
}

// SameOrigin reports whether two URLs share scheme, host and port.
func SameOrigin(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host != "" && origin(ua) == origin(ub)
}

// IsLoopbackHost reports whether host (without port) is localhost or a
// loopback address.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// origin is scheme://host:port of u, with the default port made explicit,
// so that https://a and https://a:443 are one origin.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(net.JoinHostPort(u.Hostname(), port))
}
