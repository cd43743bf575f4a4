package mysql

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
)

// The ways a connection ends under a statement when the server restarts,
// is killed or frozen are the database being unavailable (503), never a
// 500; a wrong statement is not.
func TestIsUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&gomysql.MySQLError{Number: erServerShutdown}, true},
		{&gomysql.MySQLError{Number: erConnectionKilled}, true},
		{&gomysql.MySQLError{Number: erQueryInterrupted}, true},
		{&gomysql.MySQLError{Number: erQueryTimeout}, true},
		{&gomysql.MySQLError{Number: erConCount}, true},
		{fmt.Errorf("claim: %w", gomysql.ErrInvalidConn), true},
		{sql.ErrConnDone, true},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{io.EOF, true},
		{fmt.Errorf("write: %w", syscall.ECONNRESET), true},
		{syscall.EPIPE, true},
		{&gomysql.MySQLError{Number: 1064}, false}, // a syntax error
		{&gomysql.MySQLError{Number: erDupEntry}, false},
		{errors.New("something else"), false},
	} {
		if got := isUnavailable(tc.err); got != tc.want {
			t.Errorf("isUnavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
