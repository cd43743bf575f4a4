// Package migrations holds the schema as embedded SQL files, one directory
// per dialect, applied with goose.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

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
