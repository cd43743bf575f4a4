package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlgate/dlgate/internal/testenv"
)

func TestFrozenMariaDBAnswersNothingUntilThawedAndRestartKeepsData(t *testing.T) {
	t.Parallel()
	m := testenv.StartMariaDB(t)
	db := mustOpen(t, m.NewDatabase(t))
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (7)"); err != nil {
		t.Fatal(err)
	}

	m.Freeze(t)
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err := db.PingContext(short)
	cancel()
	if err == nil {
		t.Error("ping of a frozen MariaDB succeeded")
	}
	m.Thaw()
	if err := db.PingContext(ctx); err != nil {
		t.Errorf("ping after Thaw: %v", err)
	}

	pid := m.Pid()
	m.Restart(t)
	if m.Pid() == pid {
		t.Errorf("Restart kept pid %d", pid)
	}
	var id int
	if err := db.QueryRowContext(ctx, "SELECT id FROM t").Scan(&id); err != nil || id != 7 {
		t.Errorf("after Restart, SELECT = %d, %v; want 7", id, err)
	}
}

func TestFrozenS3AnswersNothingUntilThawed(t *testing.T) {
	t.Parallel()
	for _, srv := range testenv.PrivateS3Servers() {
		t.Run(srv.Name, func(t *testing.T) {
			t.Parallel()
			frozenS3AnswersNothingUntilThawed(t, srv.Get(t))
		})
	}
}

func frozenS3AnswersNothingUntilThawed(t *testing.T, s *testenv.S3) {
	c := s.Client()
	bucket := s.NewBucket(t, false)
	head := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)})
		return err
	}
	s.Freeze(t)
	if err := head(500 * time.Millisecond); err == nil {
		t.Error("HeadBucket on a frozen server succeeded")
	}
	s.Thaw()
	if err := head(10 * time.Second); err != nil {
		t.Errorf("HeadBucket after Thaw: %v", err)
	}
}
