// Package uploads serves resumable uploads with the tus 1.0 protocol
// (core, creation, creation-with-upload, termination, expiration; SPEC
// §11) through tusd's handler (github.com/tus/tusd/v2/pkg/handler), with
// a data store and a locker of its own over the store's resumable uploads
// (storage.Uploader) and the ledger (ledger.Uploads).
//
// Nothing of an upload lives in one process: its offset, the state of its
// SHA-256 and the store's own state are in the ledger, its bytes in the
// store, its lock a lease row in the ledger. So a PATCH that resumes an
// upload may reach any gateway process, and two PATCHes of one upload
// never both write. When the last byte arrives the upload becomes a
// version exactly as PUT /v1/objects stores one, and GET {base}{id}
// answers that object's JSON. docs/design.md ("Resumable uploads") has
// the reasons; docs/api.md the endpoint.
package uploads

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"
	"github.com/tus/tusd/v2/pkg/handler"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/storage"
)

// maxExpiry is the longest expiry the ledger records (ten years).
const maxExpiry = 10 * 366 * 24 * time.Hour

// Config configures New.
type Config struct {
	// Store receives the bytes; it must implement storage.Uploader.
	Store storage.Store
	// Bucket is where uploads go; "" is the store's default, as for PUT
	// /v1/objects without ?bucket.
	Bucket string
	// Ledger keeps the uploads.
	Ledger ledger.Uploads
	// Record records a version an upload became, as PUT /v1/objects
	// records its own (the gateway: ObjectRecord, and the audit entry
	// object.stored, with the actor the request's context carries). When
	// it fails, the version is deleted again (storage.Deleter) and the
	// upload fails, as a PUT whose record fails. Required.
	Record func(ctx context.Context, v storage.Version) error
	// BasePath is the path the handler answers under, with its trailing
	// slash ("/v1/uploads/"); upload URLs are BasePath + id. Required.
	BasePath string
	// The limits, required and positive (the gateway passes its options'
	// config.UploadLimits, config's defaults where nothing was set).
	// Expiry is how long an unfinished upload lives after its creation or
	// its last PATCH, and a finished one's JSON after its finish
	// (GATEWAY_UPLOAD_EXPIRY), at most ten years.
	Expiry time.Duration
	// MaxSize is the largest Upload-Length accepted (413 beyond, and
	// Tus-Max-Size).
	MaxSize int64
	// LockLease is how long a request's lock lasts without being renewed:
	// how long the upload of a process that died stays locked. LockWait is
	// how long a request waits for another's lock before its 423.
	// Checkpoint is how many bytes a PATCH appends between two records of
	// its offset.
	LockLease  time.Duration
	LockWait   time.Duration
	Checkpoint int64
	// Logger receives the package's log lines, and tusd's (its
	// per-request ones at Debug); nil means slog.Default().
	Logger *slog.Logger
}

// Handler serves tus at Config.BasePath. It holds no upload's state:
// many Handlers in many processes can serve the same uploads.
type Handler struct {
	cfg    Config
	up     storage.Uploader
	tus    *handler.UnroutedHandler
	routes http.Handler
	locker *locker
	log    *slog.Logger
}

// New returns the handler of cfg. It returns an error when cfg.Store does
// not implement storage.Uploader, or a required field is missing or
// invalid; it applies no defaults of its own.
func New(cfg Config) (*Handler, error) {
	up, ok := cfg.Store.(storage.Uploader)
	switch {
	case !ok:
		return nil, fmt.Errorf("uploads: the store %T cannot take resumable uploads", cfg.Store)
	case cfg.Ledger == nil || cfg.Record == nil:
		return nil, errors.New("uploads: a ledger and a Record function are required")
	case !strings.HasPrefix(cfg.BasePath, "/") || !strings.HasSuffix(cfg.BasePath, "/"):
		return nil, fmt.Errorf("uploads: base path %q must start and end with /", cfg.BasePath)
	case cfg.Expiry <= 0 || cfg.MaxSize <= 0 || cfg.LockLease <= 0 || cfg.LockWait <= 0 || cfg.Checkpoint <= 0:
		return nil, errors.New("uploads: the expiry, the size, the lock's lease and wait and the checkpoint must be positive")
	case cfg.Expiry > maxExpiry:
		return nil, fmt.Errorf("uploads: expiry %v is longer than %v", cfg.Expiry, maxExpiry)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Handler{cfg: cfg, up: up, log: cfg.Logger}
	h.locker = &locker{l: cfg.Ledger, lease: cfg.LockLease, wait: cfg.LockWait, log: cfg.Logger}
	composer := handler.NewStoreComposer()
	ds := &dataStore{h: h}
	composer.UseCore(ds)
	composer.UseTerminater(ds)
	composer.UseLocker(h.locker)
	tus, err := handler.NewUnroutedHandler(handler.Config{
		StoreComposer:           composer,
		BasePath:                cfg.BasePath,
		MaxSize:                 cfg.MaxSize,
		DisableDownload:         true,
		DisableConcatenation:    true,
		Cors:                    &handler.CorsConfig{Disable: true}, // the admin API is not for other origins
		Logger:                  tusdLogger(cfg.Logger),
		PreUploadCreateCallback: h.beforeCreate,
		// tusd's wait ends after the locker's, so that a lock held too
		// long is the locker's 423, not tusd's 500.
		AcquireLockTimeout: cfg.LockWait + 5*time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("uploads: %w", err)
	}
	h.tus = tus
	h.routes = tus.Middleware(http.HandlerFunc(h.route))
	return h, nil
}

// requestState is what the calls of one request share: tusd hands the
// locker and the data store the request's context, not each other.
type requestState struct {
	holder string         // the lock this request holds
	upload *ledger.Upload // the upload it read, for Upload-Expires
	read   time.Time      // when it was read, by this process's monotonic clock
}

type stateKey struct{}

func stateOf(ctx context.Context) *requestState {
	if st, ok := ctx.Value(stateKey{}).(*requestState); ok {
		return st
	}
	return &requestState{}
}

// ServeHTTP serves the routes BasePath and BasePath{id}, {id} read with
// mux.Vars as every routed handler reads its path variables: POST
// creates, HEAD and PATCH resume, DELETE terminates (tus), GET answers the
// stored object's JSON once the upload is finished (RFC 9110 methods; tus
// 1.0 for the rest).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st := &requestState{}
	r = r.WithContext(context.WithValue(r.Context(), stateKey{}, st))
	pw := &problemWriter{ResponseWriter: w, r: r, st: st}
	defer pw.finish()
	// The router matches the escaped path (object keys may hold encoded
	// characters): the id is unescaped here, as the path was before.
	id, err := url.PathUnescape(mux.Vars(r)["id"])
	if err != nil {
		pw.sendError(handler.ErrNotFound)
		return
	}
	// tusd's handlers read the upload id from the request's path, which
	// it expects stripped of the base path (as under http.StripPrefix):
	// the inner request's path is the id alone.
	inner := new(http.Request)
	*inner = *r
	inner.URL = new(url.URL)
	*inner.URL = *r.URL
	inner.URL.Path, inner.URL.RawPath = id, ""
	if r.Method == http.MethodGet && id != "" {
		h.serveObject(pw, inner, id)
		return
	}
	h.routes.ServeHTTP(pw, inner)
}

// route sends a tus request to tusd's handler of its method.
func (h *Handler) route(w http.ResponseWriter, r *http.Request) {
	pw := w.(*problemWriter)
	id := strings.Trim(r.URL.Path, "/")
	switch {
	case id == "" && r.Method == http.MethodPost:
		h.tus.PostFile(w, r)
	case id == "":
		w.Header().Set("Allow", "POST, OPTIONS")
		pw.sendError(errMethod)
	case r.Method == http.MethodHead:
		h.tus.HeadFile(w, r)
	case r.Method == http.MethodPatch:
		h.tus.PatchFile(w, r)
	case r.Method == http.MethodDelete:
		h.tus.DelFile(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, PATCH, DELETE, OPTIONS")
		pw.sendError(errMethod)
	}
}

// beforeCreate reads the creation's Upload-Metadata strictly, refusing
// (400) what the gateway cannot store, and chooses the upload's id.
func (h *Handler) beforeCreate(ev handler.HookEvent) (handler.HTTPResponse, handler.FileInfoChanges, error) {
	m, err := parseMetadata(ev.HTTPRequest.Header.Get("Upload-Metadata"))
	if err != nil {
		h.log.DebugContext(ev.Context, "upload refused", "reason", "metadata", "err", err)
		return handler.HTTPResponse{}, handler.FileInfoChanges{}, err
	}
	return handler.HTTPResponse{}, handler.FileInfoChanges{ID: newID(), MetaData: m.tusMetadata()}, nil
}

func newID() string { return uuid.Must(uuid.NewV7()).String() }

// validID reports whether id could be an upload's: anything else is a
// 404 without a database query.
func validID(id string) bool {
	u, err := uuid.Parse(id)
	return err == nil && u.String() == id
}

// storageUpload is the store's view of u.
func storageUpload(u *ledger.Upload) storage.Upload {
	return storage.Upload{Bucket: u.Bucket, Key: u.Key, ContentType: u.ContentType, Size: u.Size, Offset: u.Offset,
		SHA256: u.SHA256State, PartSize: u.PartSize, State: u.StoreState}
}
