package gateway

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/server"
)

// adminPrefix is where the admin API (Options.Admin) is served, and
// consolePrefix the console (Options.Console).
const (
	adminPrefix   = "/admin/v1/"
	consolePrefix = "/console/"
)

// serveAdmin hands an admin request, authenticated, to Options.Admin.
func (g *Gateway) serveAdmin(c echo.Context) error {
	g.opts.Admin.ServeHTTP(c.Response(), c.Request())
	return nil
}

// authenticateAdmin admits an admin request only with a credential that
// AdminAuth accepts: one with the admin scope (an MCP token without it gets
// 403 from AdminAuth and never reaches the routes). The principal goes in
// the request's context (server.PrincipalFrom) for the audit log.
func (g *Gateway) authenticateAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		p, _, err := g.opts.AdminAuth.Authenticate(r)
		if err != nil {
			return g.refuseCredential(c, err)
		}
		c.SetRequest(r.WithContext(server.WithPrincipal(r.Context(), p)))
		return next(c)
	}
}

// isTransfer reports whether a request moves a whole store (an admin
// backup, export or import): like a stream it holds a slot of the stream
// cap and has no request deadline, as its length is the store's.
func isTransfer(r *http.Request) bool {
	p := r.URL.Path
	return strings.HasPrefix(p, adminPrefix) &&
		(strings.HasSuffix(p, "/backup") || strings.HasSuffix(p, "/export") || strings.HasSuffix(p, "/import"))
}
