// Package migrations holds the schema as embedded SQL files, one directory
// per dialect, applied with goose.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/pressly/goose/v3"
)

//go:embed mysql/*.sql sqlite/*.sql
var files embed.FS

// Dialects with a migration directory.
const (
	MySQL  = "mysql"
	SQLite = "sqlite"
)

// Up applies every pending migration of dialect to db. The caller holds the
// cross-process migration lock (see ledger/mysql and ledger/sqlite), so
// several processes starting at once apply each migration exactly once.
func Up(ctx context.Context, db *sql.DB, dialect string) error {
	var gd goose.Dialect
	switch dialect {
	case MySQL:
		gd = goose.DialectMySQL
	case SQLite:
		gd = goose.DialectSQLite3
	default:
		return fmt.Errorf("migrations: unknown dialect %q", dialect)
	}
	sub, err := fs.Sub(files, dialect)
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(gd, db, sub)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	return nil
}

// Versions returns the numbers of dialect's migrations, in order. They
// need not be consecutive: a number may be reserved for a migration that
// lands later.
func Versions(dialect string) ([]int64, error) {
	names, err := fs.Glob(files, dialect+"/*.sql")
	if err != nil || len(names) == 0 {
		return nil, fmt.Errorf("migrations: no migrations for dialect %q", dialect)
	}
	out := make([]int64, 0, len(names))
	for _, name := range names {
		num, _, _ := strings.Cut(strings.TrimPrefix(name, dialect+"/"), "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("migrations: %s is not numbered", name)
		}
		out = append(out, v)
	}
	return out, nil
}
