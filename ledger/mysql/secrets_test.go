package mysql_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger/ledgertest"
	"github.com/dlgate/dlgate/ledger/sqlcore"
)

// No operator's secret reaches the database: after keys are made, used
// and revoked, and console sessions opened, a mariadb-dump of the
// database, binary columns as they are and in hex, holds no key's text,
// body, 32 bytes or their hex, nor a console session's.
func TestNoSecretReachesTheDatabase(t *testing.T) {
	dumpBin := testenv.MustBinary(t, "mariadb-dump", "mariadb-client")
	dsn := testenv.SharedMariaDB(t).NewDatabase(t)
	db := MustOpen(t, dsn, time.Now).(*sqlcore.DB)
	db.DBClock = nil
	secrets := ledgertest.StoreSecrets(t, db)
	needles := secrets.Needles()
	c, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		t.Fatalf("DSN address %q: %v", c.Addr, err)
	}
	dump := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, dumpBin, append([]string{"--host=" + host, "--port=" + port, "--protocol=TCP",
			"--user=" + c.User, "--single-transaction", "--skip-comments"}, append(args, c.DBName)...)...)
		cmd.Env = append(os.Environ(), "MYSQL_PWD="+c.Passwd)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("mariadb-dump: %v: %s", err, stderr.Bytes())
		}
		if !bytes.Contains(out, []byte("INSERT INTO `api_keys`")) || !bytes.Contains(out, []byte("INSERT INTO `console_sessions`")) {
			t.Fatalf("the dump holds no keys or console sessions:\n%.2000s", out)
		}
		return out
	}
	found := func() int {
		n := 0
		for _, args := range [][]string{nil, {"--hex-blob"}} {
			out := dump(args...)
			for _, needle := range needles {
				if bytes.Contains(out, needle) {
					n++
				}
			}
		}
		return n
	}
	if n := found(); n != 0 {
		t.Fatalf("the dump holds %d forms of the secrets", n)
	}
	// The dump shows a secret where one is.
	if _, err := db.SQL().Exec("UPDATE audit_entries SET details = ?", secrets.Texts[0]); err != nil {
		t.Fatal(err)
	}
	if n := found(); n == 0 {
		t.Fatal("a secret planted in a column is not in the dump: the scan sees nothing")
	}
}
