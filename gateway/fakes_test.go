package gateway_test

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/storage"
)

// fakeLedger passes every call to the real ledger and counts it by method,
// so a test can prove that a request never reached the database.
type fakeLedger struct {
	ledger.Ledger

	mu    sync.Mutex
	calls map[string]int
}

var _ ledger.Ledger = (*fakeLedger)(nil)

func (f *fakeLedger) count(method string) {
	f.mu.Lock()
	f.calls[method]++
	f.mu.Unlock()
}

// Calls returns the number of calls of method, or of every method when
// method is "".
func (f *fakeLedger) Calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if method != "" {
		return f.calls[method]
	}
	n := 0
	for _, c := range f.calls {
		n += c
	}
	return n
}

func (f *fakeLedger) CreateLink(ctx context.Context, l *ledger.Link) (*ledger.Link, bool, error) {
	f.count("CreateLink")
	return f.Ledger.CreateLink(ctx, l)
}

func (f *fakeLedger) LinkByTokenHash(ctx context.Context, hash []byte) (*ledger.Link, error) {
	f.count("LinkByTokenHash")
	return f.Ledger.LinkByTokenHash(ctx, hash)
}

func (f *fakeLedger) Link(ctx context.Context, id string) (*ledger.LinkStatus, error) {
	f.count("Link")
	return f.Ledger.Link(ctx, id)
}

func (f *fakeLedger) Claim(ctx context.Context, req ledger.ClaimRequest) (*ledger.Grant, error) {
	f.count("Claim")
	return f.Ledger.Claim(ctx, req)
}

// ClaimByToken counts as a lookup and a claim: the one call does both.
func (f *fakeLedger) ClaimByToken(ctx context.Context, hash []byte, req ledger.ClaimRequest, confirmed bool) (ledger.ClaimOutcome, error) {
	f.count("ClaimByToken")
	return f.Ledger.ClaimByToken(ctx, hash, req, confirmed)
}

func (f *fakeLedger) Refund(ctx context.Context, grantID string) error {
	f.count("Refund")
	return f.Ledger.Refund(ctx, grantID)
}

func (f *fakeLedger) RevokeLink(ctx context.Context, id string) error {
	f.count("RevokeLink")
	return f.Ledger.RevokeLink(ctx, id)
}

func (f *fakeLedger) AddAllowance(ctx context.Context, id string, n int, reason string) error {
	f.count("AddAllowance")
	return f.Ledger.AddAllowance(ctx, id, n, reason)
}

func (f *fakeLedger) Grants(ctx context.Context, linkID, cursor string, limit int) (ledger.Page, error) {
	f.count("Grants")
	return f.Ledger.Grants(ctx, linkID, cursor, limit)
}

func (f *fakeLedger) ListLinks(ctx context.Context, q ledger.ListQuery) (ledger.LinkPage, error) {
	f.count("ListLinks")
	return f.Ledger.ListLinks(ctx, q)
}

func (f *fakeLedger) AllowanceChanges(ctx context.Context, linkID string) ([]ledger.AllowanceChange, error) {
	f.count("AllowanceChanges")
	return f.Ledger.AllowanceChanges(ctx, linkID)
}

func (f *fakeLedger) MintSession(ctx context.Context, req ledger.MintRequest) (*ledger.Session, bool, error) {
	f.count("MintSession")
	return f.Ledger.MintSession(ctx, req)
}

func (f *fakeLedger) AffinitySession(ctx context.Context, linkID, account string, keys []string) (*ledger.Session, error) {
	f.count("AffinitySession")
	return f.Ledger.AffinitySession(ctx, linkID, account, keys)
}

func (f *fakeLedger) SessionByTokenHash(ctx context.Context, hash []byte) (*ledger.Session, error) {
	f.count("SessionByTokenHash")
	return f.Ledger.SessionByTokenHash(ctx, hash)
}

func (f *fakeLedger) Session(ctx context.Context, id string) (*ledger.Session, error) {
	f.count("Session")
	return f.Ledger.Session(ctx, id)
}

func (f *fakeLedger) RevokeSession(ctx context.Context, id string) error {
	f.count("RevokeSession")
	return f.Ledger.RevokeSession(ctx, id)
}

func (f *fakeLedger) DrawBytes(ctx context.Context, sessionID string, want int64) (int64, error) {
	f.count("DrawBytes")
	return f.Ledger.DrawBytes(ctx, sessionID, want)
}

func (f *fakeLedger) ReturnBytes(ctx context.Context, sessionID string, n int64) error {
	f.count("ReturnBytes")
	return f.Ledger.ReturnBytes(ctx, sessionID, n)
}

func (f *fakeLedger) AcquireSlot(ctx context.Context, sessionID, holder string, lease time.Duration) error {
	f.count("AcquireSlot")
	return f.Ledger.AcquireSlot(ctx, sessionID, holder, lease)
}

func (f *fakeLedger) RenewSlot(ctx context.Context, sessionID, holder string, lease time.Duration) error {
	f.count("RenewSlot")
	return f.Ledger.RenewSlot(ctx, sessionID, holder, lease)
}

func (f *fakeLedger) ReleaseSlot(ctx context.Context, sessionID, holder string) error {
	f.count("ReleaseSlot")
	return f.Ledger.ReleaseSlot(ctx, sessionID, holder)
}

func (f *fakeLedger) Sweep(ctx context.Context, limit int) (ledger.SweepResult, error) {
	f.count("Sweep")
	return f.Ledger.Sweep(ctx, limit)
}

func (f *fakeLedger) RecordObject(ctx context.Context, o ledger.Object) error {
	f.count("RecordObject")
	return f.Ledger.RecordObject(ctx, o)
}

func (f *fakeLedger) StoredObject(ctx context.Context, bucket, key, versionID string) (*ledger.StoredObject, error) {
	f.count("StoredObject")
	return f.Ledger.StoredObject(ctx, bucket, key, versionID)
}

func (f *fakeLedger) BeginDeletion(ctx context.Context, bucket, key, versionID string, force bool) (*ledger.Deletion, error) {
	f.count("BeginDeletion")
	return f.Ledger.BeginDeletion(ctx, bucket, key, versionID, force)
}

func (f *fakeLedger) ClaimDeletions(ctx context.Context, retention time.Duration, limit int) ([]ledger.Deletion, error) {
	f.count("ClaimDeletions")
	return f.Ledger.ClaimDeletions(ctx, retention, limit)
}

func (f *fakeLedger) FinishDeletion(ctx context.Context, d ledger.Deletion, failure error) error {
	f.count("FinishDeletion")
	return f.Ledger.FinishDeletion(ctx, d, failure)
}

func (f *fakeLedger) PurgeLinks(ctx context.Context, retention time.Duration, limit int) (ledger.PurgeResult, error) {
	f.count("PurgeLinks")
	return f.Ledger.PurgeLinks(ctx, retention, limit)
}

func (f *fakeLedger) Ping(ctx context.Context) error {
	f.count("Ping")
	return f.Ledger.Ping(ctx)
}

// fakeStore is the real store unless a function field replaces one of its
// methods. Set the fields before the requests that should see them.
type fakeStore struct {
	storage.Store

	OpenFunc   func(ctx context.Context, v storage.Version, offset, length int64) (io.ReadCloser, error)
	PingFunc   func(ctx context.Context) error
	DeleteFunc func(ctx context.Context, v storage.Version) error
}

var (
	_ storage.Store   = (*fakeStore)(nil)
	_ storage.Pinger  = (*fakeStore)(nil)
	_ storage.Deleter = (*fakeStore)(nil)
)

func (f *fakeStore) Delete(ctx context.Context, v storage.Version) error {
	if f.DeleteFunc != nil {
		return f.DeleteFunc(ctx, v)
	}
	return f.Store.(storage.Deleter).Delete(ctx, v)
}

func (f *fakeStore) Open(ctx context.Context, v storage.Version, offset, length int64) (io.ReadCloser, error) {
	if f.OpenFunc != nil {
		return f.OpenFunc(ctx, v, offset, length)
	}
	return f.Store.Open(ctx, v, offset, length)
}

func (f *fakeStore) Ping(ctx context.Context) error {
	if f.PingFunc != nil {
		return f.PingFunc(ctx)
	}
	if p, ok := f.Store.(storage.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// readerFunc is an io.ReadCloser made of functions. It is deliberately not
// a storage.Filer, so the gateway copies through its own buffer.
type readerFunc struct {
	ReadFunc  func(p []byte) (int, error)
	CloseFunc func() error
}

func (r *readerFunc) Read(p []byte) (int, error) { return r.ReadFunc(p) }

func (r *readerFunc) Close() error {
	if r.CloseFunc != nil {
		return r.CloseFunc()
	}
	return nil
}

// gatedReader wraps the real reader rc: its first Read closes opened and
// then waits for release (or for ctx, answering ctx's error).
func gatedReader(ctx context.Context, rc io.ReadCloser, opened chan<- struct{}, release <-chan struct{}) io.ReadCloser {
	var once sync.Once
	return &readerFunc{
		ReadFunc: func(p []byte) (int, error) {
			var err error
			once.Do(func() {
				close(opened)
				select {
				case <-release:
				case <-ctx.Done():
					err = ctx.Err()
				}
			})
			if err != nil {
				return 0, err
			}
			return rc.Read(p)
		},
		CloseFunc: rc.Close,
	}
}
