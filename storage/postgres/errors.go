package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// isUndefinedTable reports whether err is PostgreSQL's undefined_table.
func isUndefinedTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01"
}
