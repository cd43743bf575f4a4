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

	// LinkPurgeFunc and SessionSweepFunc, when set, answer LinkPurge and
	// SessionSweep instead of the ledger.
	LinkPurgeFunc    func(ctx context.Context, retention time.Duration, limit int) (ledger.PurgeResult, error)
	SessionSweepFunc func(ctx context.Context, limit int) (ledger.SweepResult, error)

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

func (f *fakeLedger) LinkCreate(ctx context.Context, l *ledger.Link) (*ledger.Link, bool, error) {
	f.count("LinkCreate")
	return f.Ledger.LinkCreate(ctx, l)
}

func (f *fakeLedger) LinkGetByTokenHash(ctx context.Context, hash []byte) (*ledger.Link, error) {
	f.count("LinkGetByTokenHash")
	return f.Ledger.LinkGetByTokenHash(ctx, hash)
}

func (f *fakeLedger) LinkGet(ctx context.Context, id string) (*ledger.LinkStatus, error) {
	f.count("Link")
	return f.Ledger.LinkGet(ctx, id)
}

// LinkClaim counts as a lookup and a claim: the one call does both.
func (f *fakeLedger) LinkClaim(ctx context.Context, hash []byte, req ledger.ClaimRequest, confirmed bool) (ledger.ClaimOutcome, error) {
	f.count("LinkClaim")
	return f.Ledger.LinkClaim(ctx, hash, req, confirmed)
}

func (f *fakeLedger) GrantRefund(ctx context.Context, grantID string) error {
	f.count("Refund")
	return f.Ledger.GrantRefund(ctx, grantID)
}

func (f *fakeLedger) LinkRevoke(ctx context.Context, id string) error {
	f.count("LinkRevoke")
	return f.Ledger.LinkRevoke(ctx, id)
}

func (f *fakeLedger) AllowanceAdd(ctx context.Context, id string, n int, reason string) error {
	f.count("AllowanceAdd")
	return f.Ledger.AllowanceAdd(ctx, id, n, reason)
}

func (f *fakeLedger) GrantList(ctx context.Context, q ledger.GrantQuery) (ledger.Page, error) {
	f.count("Grants")
	return f.Ledger.GrantList(ctx, q)
}

func (f *fakeLedger) LinkList(ctx context.Context, q ledger.ListQuery) (ledger.LinkPage, error) {
	f.count("LinkList")
	return f.Ledger.LinkList(ctx, q)
}

func (f *fakeLedger) AllowanceList(ctx context.Context, linkID string) ([]ledger.AllowanceChange, error) {
	f.count("AllowanceList")
	return f.Ledger.AllowanceList(ctx, linkID)
}

func (f *fakeLedger) SessionMint(ctx context.Context, req ledger.MintRequest) (*ledger.Session, bool, error) {
	f.count("SessionMint")
	return f.Ledger.SessionMint(ctx, req)
}

func (f *fakeLedger) SessionGetByAffinity(ctx context.Context, linkID, account string, keys []string, need int64) (*ledger.Session, error) {
	f.count("SessionGetByAffinity")
	return f.Ledger.SessionGetByAffinity(ctx, linkID, account, keys, need)
}

func (f *fakeLedger) SessionGetByTokenHash(ctx context.Context, hash []byte) (*ledger.Session, error) {
	f.count("SessionGetByTokenHash")
	return f.Ledger.SessionGetByTokenHash(ctx, hash)
}

func (f *fakeLedger) SessionGet(ctx context.Context, id string) (*ledger.Session, error) {
	f.count("Session")
	return f.Ledger.SessionGet(ctx, id)
}

func (f *fakeLedger) SessionRevoke(ctx context.Context, id string) error {
	f.count("SessionRevoke")
	return f.Ledger.SessionRevoke(ctx, id)
}

func (f *fakeLedger) BudgetDraw(ctx context.Context, sessionID string, want int64) (int64, error) {
	f.count("BudgetDraw")
	return f.Ledger.BudgetDraw(ctx, sessionID, want)
}

func (f *fakeLedger) BudgetReturn(ctx context.Context, sessionID string, n int64) error {
	f.count("BudgetReturn")
	return f.Ledger.BudgetReturn(ctx, sessionID, n)
}

func (f *fakeLedger) GrantDeliveryRecord(ctx context.Context, d ledger.StreamDelivery) error {
	f.count("GrantDeliveryRecord")
	return f.Ledger.GrantDeliveryRecord(ctx, d)
}

func (f *fakeLedger) SessionDeliveryRecord(ctx context.Context, d ledger.SessionDelivery) error {
	f.count("SessionDeliveryRecord")
	return f.Ledger.SessionDeliveryRecord(ctx, d)
}

func (f *fakeLedger) GrantRetryBegin(ctx context.Context, req ledger.RetryRequest) (*ledger.Grant, error) {
	f.count("GrantRetryBegin")
	return f.Ledger.GrantRetryBegin(ctx, req)
}

func (f *fakeLedger) GrantRetryRenew(ctx context.Context, grantID string, attempt int, lease time.Duration) error {
	f.count("GrantRetryRenew")
	return f.Ledger.GrantRetryRenew(ctx, grantID, attempt, lease)
}

func (f *fakeLedger) SlotAcquire(ctx context.Context, sessionID, holder string, lease time.Duration) error {
	f.count("SlotAcquire")
	return f.Ledger.SlotAcquire(ctx, sessionID, holder, lease)
}

func (f *fakeLedger) SlotRenew(ctx context.Context, sessionID, holder string, lease time.Duration) error {
	f.count("SlotRenew")
	return f.Ledger.SlotRenew(ctx, sessionID, holder, lease)
}

func (f *fakeLedger) SlotRelease(ctx context.Context, sessionID, holder string) error {
	f.count("SlotRelease")
	return f.Ledger.SlotRelease(ctx, sessionID, holder)
}

func (f *fakeLedger) SessionSweep(ctx context.Context, limit int) (ledger.SweepResult, error) {
	f.count("Sweep")
	if f.SessionSweepFunc != nil {
		return f.SessionSweepFunc(ctx, limit)
	}
	return f.Ledger.SessionSweep(ctx, limit)
}

func (f *fakeLedger) ObjectRecord(ctx context.Context, o ledger.Object) error {
	f.count("ObjectRecord")
	return f.Ledger.ObjectRecord(ctx, o)
}

func (f *fakeLedger) ObjectGet(ctx context.Context, bucket, key, versionID string) (*ledger.StoredObject, error) {
	f.count("StoredObject")
	return f.Ledger.ObjectGet(ctx, bucket, key, versionID)
}

func (f *fakeLedger) DeletionBegin(ctx context.Context, bucket, key, versionID string, force bool) (*ledger.Deletion, error) {
	f.count("DeletionBegin")
	return f.Ledger.DeletionBegin(ctx, bucket, key, versionID, force)
}

func (f *fakeLedger) DeletionClaim(ctx context.Context, retention time.Duration, limit int) ([]ledger.Deletion, error) {
	f.count("DeletionClaim")
	return f.Ledger.DeletionClaim(ctx, retention, limit)
}

func (f *fakeLedger) DeletionFinish(ctx context.Context, d ledger.Deletion, failure error) error {
	f.count("DeletionFinish")
	return f.Ledger.DeletionFinish(ctx, d, failure)
}

func (f *fakeLedger) LinkPurge(ctx context.Context, retention time.Duration, limit int) (ledger.PurgeResult, error) {
	f.count("LinkPurge")
	if f.LinkPurgeFunc != nil {
		return f.LinkPurgeFunc(ctx, retention, limit)
	}
	return f.Ledger.LinkPurge(ctx, retention, limit)
}

func (f *fakeLedger) KeyCreate(ctx context.Context, p ledger.KeyCreateParams) (*ledger.Key, error) {
	f.count("KeyCreate")
	return f.Ledger.KeyCreate(ctx, p)
}

func (f *fakeLedger) KeyGetByHash(ctx context.Context, hash []byte) (*ledger.Key, error) {
	f.count("KeyGetByHash")
	return f.Ledger.KeyGetByHash(ctx, hash)
}

func (f *fakeLedger) KeyList(ctx context.Context, cursor string, limit int) (ledger.KeyPage, error) {
	f.count("KeyList")
	return f.Ledger.KeyList(ctx, cursor, limit)
}

func (f *fakeLedger) KeyRevoke(ctx context.Context, id string) error {
	f.count("KeyRevoke")
	return f.Ledger.KeyRevoke(ctx, id)
}

func (f *fakeLedger) KeyTouch(ctx context.Context, id string) (bool, error) {
	f.count("KeyTouch")
	return f.Ledger.KeyTouch(ctx, id)
}

func (f *fakeLedger) AuditList(ctx context.Context, q ledger.AuditQuery) (ledger.AuditPage, error) {
	f.count("AuditList")
	return f.Ledger.AuditList(ctx, q)
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
	_ storage.Store    = (*fakeStore)(nil)
	_ storage.Pinger   = (*fakeStore)(nil)
	_ storage.Deleter  = (*fakeStore)(nil)
	_ storage.Uploader = (*fakeStore)(nil)
)

// The resumable uploads of the store below, unchanged.
func (f *fakeStore) UploadBegin(ctx context.Context, bucket, key string, size int64, contentType string) (storage.Upload, error) {
	return f.Store.(storage.Uploader).UploadBegin(ctx, bucket, key, size, contentType)
}

func (f *fakeStore) UploadAppend(ctx context.Context, u storage.Upload, body io.Reader) (storage.Upload, error) {
	return f.Store.(storage.Uploader).UploadAppend(ctx, u, body)
}

func (f *fakeStore) UploadFinish(ctx context.Context, u storage.Upload) (storage.Version, error) {
	return f.Store.(storage.Uploader).UploadFinish(ctx, u)
}

func (f *fakeStore) UploadAbort(ctx context.Context, u storage.Upload) error {
	return f.Store.(storage.Uploader).UploadAbort(ctx, u)
}

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
