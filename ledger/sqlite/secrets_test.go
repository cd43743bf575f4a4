package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/ledger/ledgertest"
	"github.com/dlgate/dlgate/ledger/sqlite"
)

// No operator's secret reaches the database: after keys are made, used
// and revoked, and console sessions opened, neither any column of any
// table nor the bytes of the database file and its WAL hold a key's text,
// its body, its 32 bytes or their hex, nor a console session's.
func TestNoSecretReachesTheDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.db")
	db, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := sqlite.Migrate(context.Background(), db.SQL(), path); err != nil {
		t.Fatal(err)
	}
	db.Now = time.Now
	secrets := ledgertest.StoreSecrets(t, db)
	needles := secrets.Needles()
	if found := scanSQLite(t, db.SQL(), path, needles); len(found) > 0 {
		t.Fatalf("secrets at rest: %v", found)
	}
	// The scan finds a secret where one is: planted in a column, it is
	// seen in the column and in the file.
	if _, err := db.SQL().Exec(`UPDATE audit_entries SET details = ?`, secrets.Texts[0]); err != nil {
		t.Fatal(err)
	}
	found := scanSQLite(t, db.SQL(), path, needles)
	if !slices.Contains(found, "audit_entries.details") || !slices.ContainsFunc(found, func(s string) bool {
		return strings.HasPrefix(s, "file ")
	}) {
		t.Fatalf("a planted secret was found in %v, want audit_entries.details and a file", found)
	}
}

// scanSQLite returns where any of needles is at rest: "table.column" for
// a column of a row holding one, "file NAME" for the database file or its
// WAL.
func scanSQLite(t *testing.T, db *sql.DB, path string, needles [][]byte) []string {
	t.Helper()
	var found []string
	hit := func(where string, b []byte) {
		for _, n := range needles {
			if bytes.Contains(b, n) && !slices.Contains(found, where) {
				found = append(found, where)
			}
		}
	}
	columns := 0
	for table, cols := range sqliteColumns(t, db) {
		for _, col := range cols {
			rows, err := db.Query(fmt.Sprintf(`SELECT "%s" FROM "%s"`, col, table))
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var v any
				if err := rows.Scan(&v); err != nil {
					t.Fatal(err)
				}
				cell := []byte(fmt.Sprint(v))
				if b, ok := v.([]byte); ok {
					cell = b
				}
				hit(table+"."+col, cell)
			}
			rows.Close()
			columns++
		}
	}
	if columns < 20 {
		t.Fatalf("scanned %d columns; the schema has more", columns)
	}
	scanned := 0
	for _, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		scanned += len(b)
		hit("file "+filepath.Base(p), b)
	}
	if scanned == 0 {
		t.Fatal("no database file to scan")
	}
	return found
}

// sqliteColumns lists the columns of every table.
func sqliteColumns(t *testing.T, db *sql.DB) map[string][]string {
	t.Helper()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	out := map[string][]string{}
	for _, table := range tables {
		rows, err := db.Query(`SELECT name FROM pragma_table_info(?)`, table)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var col string
			if err := rows.Scan(&col); err != nil {
				t.Fatal(err)
			}
			out[table] = append(out[table], col)
		}
		rows.Close()
	}
	return out
}
