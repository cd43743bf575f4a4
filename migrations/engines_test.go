package migrations

import (
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestMySQLMigrationsAvoidWhatTiDBRefuses reads every MySQL migration and
// refuses the DDL that MySQL 8.4 and MariaDB 10.11 accept and TiDB 8.5 does
// not (docs/design.md, "Engines"): a STORED generated column added to an
// existing table (TiDB error 3106), and an ALTER that adds a column and a
// key, or anything else besides, at once (a key on the new column fails
// with error 1072; one change per ALTER is what every engine takes).
func TestMySQLMigrationsAvoidWhatTiDBRefuses(t *testing.T) {
	names, err := fs.Glob(files, "mysql/*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("no MySQL migrations: %v", err)
	}
	comment := regexp.MustCompile(`(?m)--.*$`)
	for _, name := range names {
		b, err := fs.ReadFile(files, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, stmt := range strings.Split(comment.ReplaceAllString(string(b), ""), ";") {
			s := strings.ToUpper(strings.Join(strings.Fields(stmt), " "))
			if !strings.HasPrefix(s, "ALTER TABLE ") {
				continue
			}
			if offending := tidbRefuses(s); offending != "" {
				t.Errorf("%s: %s: %q", name, offending, strings.TrimSpace(stmt))
			}
		}
	}
}

// tidbRefuses says why TiDB would refuse the ALTER TABLE statement s
// (upper case, spaces collapsed), or "".
func tidbRefuses(s string) string {
	addsColumn := strings.Contains(s, " ADD COLUMN ")
	switch {
	case addsColumn && strings.Contains(s, " AS (") && strings.Contains(s, " STORED"):
		return "adds a STORED generated column (TiDB error 3106); add it VIRTUAL"
	case addsColumn && strings.Count(s, ",") > 0 && (strings.Contains(s, " ADD KEY ") ||
		strings.Contains(s, " ADD INDEX ") || strings.Contains(s, " ADD UNIQUE ") ||
		strings.Contains(s, " ADD CONSTRAINT ") || strings.Contains(s, " ADD PRIMARY ")):
		return "adds a column and a key in one ALTER (TiDB error 1072); use two"
	}
	return ""
}

func TestTiDBRefuses(t *testing.T) {
	cases := []struct {
		stmt    string
		refused bool
	}{
		{"ALTER TABLE links ADD COLUMN is_revoked BOOLEAN AS (revoked_at IS NOT NULL) STORED, ADD KEY k (is_revoked)", true},
		{"ALTER TABLE links ADD COLUMN is_revoked BOOLEAN AS (revoked_at IS NOT NULL) STORED", true},
		{"ALTER TABLE links ADD COLUMN is_revoked BOOLEAN AS (revoked_at IS NOT NULL) VIRTUAL, ADD KEY k (is_revoked)", true},
		{"ALTER TABLE links ADD COLUMN is_revoked BOOLEAN AS (revoked_at IS NOT NULL) VIRTUAL", false},
		{"ALTER TABLE links ADD KEY a (x), ADD KEY b (y)", false},
		{"ALTER TABLE links ADD COLUMN event_seq BIGINT NOT NULL DEFAULT 0", false},
	}
	for _, c := range cases {
		if got := tidbRefuses(c.stmt); (got != "") != c.refused {
			t.Errorf("tidbRefuses(%q) = %q, want refused %v", c.stmt, got, c.refused)
		}
	}
}

func TestVersionsListEveryMigrationInOrder(t *testing.T) {
	for _, d := range []string{MySQL, SQLite} {
		v, err := Versions(d)
		if err != nil {
			t.Fatal(err)
		}
		names, _ := fs.Glob(files, d+"/*.sql")
		if len(v) != len(names) || v[0] != 1 || !slices.IsSorted(v) {
			t.Fatalf("Versions(%s) = %v for %d files", d, v, len(names))
		}
	}
	my, _ := Versions(MySQL)
	lite, _ := Versions(SQLite)
	if !slices.Equal(my, lite) {
		t.Fatalf("MySQL migrations %v, SQLite %v: each needs its twin", my, lite)
	}
	if _, err := Versions("oracle"); err == nil {
		t.Fatal("Versions of an unknown dialect succeeded")
	}
}
