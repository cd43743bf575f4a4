// Package migrations holds the schema as embedded SQL files, one directory
// per dialect, applied with goose.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
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

// Versions returns the version numbers of dialect's migrations, in
// order: what a database Up migrated has applied, each once. Numbers may
// have gaps (a number reserved for a change not merged yet).
func Versions(dialect string) ([]int64, error) {
	names, err := fs.Glob(files, dialect+"/*.sql")
	if err != nil || len(names) == 0 {
		return nil, fmt.Errorf("migrations: no migrations for dialect %q", dialect)
	}
	var out []int64
	for _, name := range names { // fs.Glob sorts, and the numbers have five digits
		num, _, ok := strings.Cut(path.Base(name), "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("migrations: %s is not named NNNNN_name.sql", name)
		}
		out = append(out, v)
	}
	return out, nil
}
