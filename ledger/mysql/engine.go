package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// Kind is the server behind the MySQL protocol.
type Kind string

// The engines the ledger runs on (docs/design.md, "Engines").
const (
	MySQL   Kind = "MySQL"
	MariaDB Kind = "MariaDB"
	TiDB    Kind = "TiDB"
)

// Engine is what VERSION() says about the server, read once at Open.
type Engine struct {
	Kind Kind
	// Major, Minor and Patch are the engine's own version: 10.11.6 for
	// "10.11.6-MariaDB-0+deb12u1", 8.5.3 for TiDB's "8.0.11-TiDB-v8.5.3"
	// (whose leading 8.0.11 is the MySQL version it speaks).
	Major, Minor, Patch int
	// Version is VERSION() as the server reported it.
	Version string
}

func (e Engine) String() string {
	return fmt.Sprintf("%s %d.%d.%d", e.Kind, e.Major, e.Minor, e.Patch)
}

func (e Engine) atLeast(major, minor, patch int) bool {
	if e.Major != major {
		return e.Major > major
	}
	if e.Minor != minor {
		return e.Minor > minor
	}
	return e.Patch >= patch
}

// SkipLocked reports whether the engine honours FOR UPDATE SKIP LOCKED:
// MySQL since 8.0.1, MariaDB since 10.6. TiDB accepts the clause and
// locks nothing (pingcap/tidb#69720), so it is never sent there.
func (e Engine) SkipLocked() bool {
	switch e.Kind {
	case MySQL:
		return e.atLeast(8, 0, 1)
	case MariaDB:
		return e.atLeast(10, 6, 0)
	}
	return false
}

// ParseVersion reads VERSION(): "8.4.3", "10.11.6-MariaDB-0+deb12u1",
// "8.0.11-TiDB-v8.5.3". A version it cannot read is an error, so that a
// server the ledger does not know is never taken for one it does.
func ParseVersion(v string) (Engine, error) {
	e := Engine{Kind: MySQL, Version: v}
	num := v
	switch {
	case strings.Contains(v, "-TiDB-"):
		e.Kind = TiDB
		num = strings.TrimPrefix(v[strings.Index(v, "-TiDB-")+len("-TiDB-"):], "v")
	case strings.Contains(strings.ToLower(v), "mariadb"):
		e.Kind = MariaDB
		// A replication-safe prefix some MariaDB builds report.
		num = strings.TrimPrefix(v, "5.5.5-")
	}
	if i := strings.IndexFunc(num, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
		num = num[:i]
	}
	parts := strings.Split(num, ".")
	if len(parts) < 2 {
		return Engine{}, fmt.Errorf("mysql: unrecognised server version %q", v)
	}
	nums := []*int{&e.Major, &e.Minor, &e.Patch}
	for i, p := range parts {
		if i == len(nums) {
			break
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return Engine{}, fmt.Errorf("mysql: unrecognised server version %q", v)
		}
		*nums[i] = n
	}
	return e, nil
}

// Detect asks the server behind db what it is.
func Detect(ctx context.Context, db *sql.DB) (Engine, error) {
	var v string
	if err := db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&v); err != nil {
		return Engine{}, fmt.Errorf("mysql: server version: %w", err)
	}
	return ParseVersion(v)
}
