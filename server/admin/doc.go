// Package admin is memgate's admin API: the routes under /admin/v1/ that
// operate a running server's namespaces (list them, their stats, export,
// import, an online backup, candidates, the trash, erasure), as JSON, with
// errors {error:{code,message}} under the HTTP status of their code. Its
// OpenAPI 3.1 description is OpenAPI, served at /admin/v1/openapi.json.
//
// It knows neither who calls nor how stores are kept: the gateway
// authenticates admins (the memory:admin scope or MEMGATE_ADMIN_TOKEN) and
// the control socket checks its peer before a request reaches Handler, and
// the operations come in as the functions of Ops, which cmd/memgate makes
// from the pool of stores. It imports the root package only.
package admin
