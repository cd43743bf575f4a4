package public

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlgate/dlgate/gateway/deliver"
	"github.com/dlgate/dlgate/gateway/metrics"
	"github.com/dlgate/dlgate/ledger"
)

// stalledDeliveries is a database that takes no delivery record until
// release is closed.
type stalledDeliveries struct {
	ledger.Deliveries
	release chan struct{}
	started atomic.Int64
}

func (d *stalledDeliveries) GrantDeliveryRecord(context.Context, ledger.StreamDelivery) error {
	d.started.Add(1)
	<-d.release
	return nil
}

// The delivery records a process has waiting are bounded: a stream
// response finds a place for its record and returns at once while there
// is one, and waits for one otherwise, so that a database slower than the
// downloads slows the downloads instead of growing the process (a hot
// link at 5,600 GETs a second once left 92,579 records waiting).
func TestTheDeliveryRecordsWaitingAreBounded(t *testing.T) {
	const places = 2
	db := &stalledDeliveries{release: make(chan struct{})}
	h := New(Config{Deliveries: db, Log: slog.New(slog.DiscardHandler), Metrics: metrics.New("test"), Now: time.Now})
	h.recording = make(chan struct{}, places)
	record := func() {
		m := &streamMeter{h: h, grant: &ledger.Grant{ID: "0192f000-0000-7000-8000-000000000001"}, attempt: 1}
		m.record(context.Background(), deliver.Result{Status: 200, Sent: 10, Acked: 10, Measured: true})
	}
	for range places {
		record() // returns at once: there is a place
	}
	third := make(chan struct{})
	go func() { record(); close(third) }()
	select {
	case <-third:
		t.Fatalf("a record beyond the %d places returned while they were all waiting", places)
	case <-time.After(100 * time.Millisecond):
	}
	close(db.release)
	<-third
	h.WaitRecords()
	if got := db.started.Load(); got != places+1 {
		t.Errorf("%d records written, want %d", got, places+1)
	}
}
