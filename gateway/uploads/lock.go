package uploads

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/tus/tusd/v2/pkg/handler"

	"github.com/dlgate/dlgate/ledger"
)

var _ handler.Locker = (*locker)(nil)

// locker is tusd's locker over the ledger's upload locks: a lease row
// every process sees (ledger.Uploads.UploadLock), so two requests for one
// upload never hold it at once, in any process. tusd takes it for every
// HEAD, PATCH and DELETE, and for a POST with a body.
type locker struct {
	l     ledger.Uploads
	lease time.Duration
	wait  time.Duration
	log   *slog.Logger
}

// unlockTimeout bounds the release of a lock after its request, whose
// context may be over.
const unlockTimeout = 5 * time.Second

func (lk *locker) NewLock(id string) (handler.Lock, error) {
	return &lock{lk: lk, id: id}, nil
}

// lock is one request's hold on one upload.
type lock struct {
	lk     *locker
	id     string
	holder string
	stop   chan struct{}
	done   chan struct{}
}

// Lock takes the upload's lock, waiting up to the locker's wait while
// another request holds it (polling, from 10 ms up to a quarter of a
// second), then 423 (tus: "423 Locked"). Held, it is renewed every third
// of its lease until Unlock; a renewal that finds it lost (its lease
// lapsed and someone else took it) calls requestUnlock, which stops this
// request's writes (tusd cancels its body) — and the ledger refuses its
// advances anyway.
func (l *lock) Lock(ctx context.Context, requestUnlock func()) error {
	if !validID(l.id) {
		return handler.ErrNotFound
	}
	l.holder = newID()
	giveUp := time.Now().Add(l.lk.wait)
	for pause := 10 * time.Millisecond; ; pause = min(2*pause, 250*time.Millisecond) {
		err := l.lk.l.UploadLock(ctx, l.id, l.holder, l.lk.lease)
		if err == nil {
			break
		}
		if !errors.Is(err, ledger.ErrLocked) {
			return ledgerError(err)
		}
		if time.Now().Add(pause).After(giveUp) {
			l.lk.log.DebugContext(ctx, "upload refused", "upload_id", l.id, "reason", "locked")
			return handler.ErrFileLocked
		}
		select {
		case <-ctx.Done():
			return handler.ErrLockTimeout
		case <-time.After(pause):
		}
	}
	stateOf(ctx).holder = l.holder
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go l.renew(context.WithoutCancel(ctx), requestUnlock)
	return nil
}

func (l *lock) renew(ctx context.Context, requestUnlock func()) {
	defer close(l.done)
	tick := time.NewTicker(l.lk.lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		err := l.lk.l.UploadLock(ctx, l.id, l.holder, l.lk.lease)
		switch {
		case errors.Is(err, ledger.ErrLocked), errors.Is(err, ledger.ErrNotFound):
			l.lk.log.WarnContext(ctx, "upload lock lost", "upload_id", l.id, "err", err)
			requestUnlock()
			return
		case err != nil:
			// Tried again at the next tick, within the lease.
			l.lk.log.WarnContext(ctx, "upload lock not renewed", "upload_id", l.id, "err", err)
		}
	}
}

// Unlock stops the renewals and frees the lock at once, for the next
// request not to wait out the lease.
func (l *lock) Unlock() error {
	if l.stop == nil {
		return nil
	}
	close(l.stop)
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
	defer cancel()
	if err := l.lk.l.UploadUnlock(ctx, l.id, l.holder); err != nil {
		// It lapses after its lease.
		l.lk.log.WarnContext(ctx, "upload lock not released", "upload_id", l.id, "err", err)
	}
	return nil
}
