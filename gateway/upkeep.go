package gateway

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/storage"
)

// retentionBatch bounds the rows one retention step takes in one
// transaction; a step goes on with another batch while batches come back
// full, up to retentionBatches.
const (
	retentionBatch   = 100
	retentionBatches = 10
)

// Retain runs one round of retention: the store deletions that are due,
// then the audit purge. RunSweeper runs it every interval.
func (s *Server) Retain(ctx context.Context) {
	s.sweepObjects(ctx)
	s.purgeAudit(ctx)
}

// sweepObjects deletes from the store what the ledger hands out: versions
// unreferenced for ObjectRetention (0 keeps them, but deletions that
// failed, an operator's included, are still retried), one at a time, each
// outcome reported back. The ledger decided and marked each version
// before it is handed out, and hands it to one process only.
func (s *Server) sweepObjects(ctx context.Context) {
	deleter, ok := s.Store.(storage.Deleter)
	if !ok {
		return
	}
	for range retentionBatches {
		ds, err := s.objects.DeletionClaim(ctx, s.ObjectRetention, retentionBatch)
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "retention: claiming deletions failed", "err", err)
			}
			return
		}
		for _, d := range ds {
			dctx, cancel := context.WithTimeout(ctx, admin.StoreDeleteTimeout)
			err := s.admin.Objects.DeleteVersion(dctx, deleter, d)
			cancel()
			if err != nil {
				s.metrics.Swept.WithLabelValues("object_deletions_failed").Inc()
				s.log.WarnContext(ctx, "retention: object deletion failed; retried later", "key", d.Object.Key,
					"version_id", d.Object.VersionID, "attempts", d.Attempts+1, "err", err)
				continue
			}
			s.metrics.Swept.WithLabelValues("objects_deleted").Inc()
			s.log.InfoContext(ctx, "retention: object deleted", "key", d.Object.Key, "version_id", d.Object.VersionID,
				"bytes", d.Object.Size)
		}
		if len(ds) < retentionBatch {
			return
		}
	}
}

// purgeAudit deletes links dead for AuditRetention, with their grants and
// sessions, the tombstones of versions deleted as long ago, audit entries
// older than that and keys revoked or expired as long ago. 0 keeps
// everything. It goes on while any of the four comes back a full batch.
func (s *Server) purgeAudit(ctx context.Context) {
	if s.AuditRetention <= 0 {
		return
	}
	for range retentionBatches {
		res, err := s.objects.LinkPurge(ctx, s.AuditRetention, retentionBatch)
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "retention: purging links failed", "err", err)
			}
			return
		}
		s.metrics.Swept.WithLabelValues("links_purged").Add(float64(res.Links))
		s.metrics.Swept.WithLabelValues("tombstones_purged").Add(float64(res.Tombstones))
		s.metrics.Swept.WithLabelValues("audit_entries_purged").Add(float64(res.Audit))
		s.metrics.Swept.WithLabelValues("keys_purged").Add(float64(res.Keys))
		if res.Links > 0 || res.Tombstones > 0 || res.Audit > 0 || res.Keys > 0 {
			s.log.InfoContext(ctx, "retention: purged", "links", res.Links, "tombstones", res.Tombstones,
				"audit_entries", res.Audit, "keys", res.Keys)
		}
		if max(res.Links, res.Tombstones, res.Audit, res.Keys) < retentionBatch {
			return
		}
	}
}

// handleReady checks the database and the store at once, each under its
// own deadline, and reports each as it found it: a hung database must
// neither delay the store's check nor make the store look down.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	checks := map[string]string{"database": "ok", "store": "ok"}
	status := http.StatusOK
	if s.draining.Load() {
		checks["gateway"], status = "draining", http.StatusServiceUnavailable
	}
	probes := map[string]func(context.Context) error{"database": s.upkeep.Ping}
	if p, ok := s.Store.(storage.Pinger); ok {
		probes["store"] = p.Ping
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for name, ping := range probes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(r.Context(), s.ReadyTimeout)
			defer cancel()
			if err := ping(ctx); err != nil {
				s.log.WarnContext(ctx, "readiness: "+name, "err", err)
				mu.Lock()
				checks[name], status = "unavailable", http.StatusServiceUnavailable
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	httpx.WriteJSON(w, status, checks)
}

// RunSweeper ends expired sessions, clears lapsed leases and applies the
// retention (gateway/upkeep.go) every interval until ctx ends. Every
// process runs one; they do not collide.
func (s *Server) RunSweeper(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for {
			res, err := s.upkeep.SessionSweep(ctx, 500)
			if err != nil {
				if ctx.Err() == nil {
					s.log.WarnContext(ctx, "sweep failed", "err", err)
				}
				break
			}
			s.metrics.Swept.WithLabelValues("sessions_ended").Add(float64(res.SessionsEnded))
			s.metrics.Swept.WithLabelValues("leases_cleared").Add(float64(res.LeasesCleared))
			s.metrics.Swept.WithLabelValues("console_sessions_purged").Add(float64(res.ConsoleSessionsPurged))
			if max(res.SessionsEnded, res.LeasesCleared, res.ConsoleSessionsPurged) < 500 {
				break
			}
		}
		s.Retain(ctx)
		if s.uploads != nil {
			res, err := s.uploads.Sweep(ctx)
			if err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "sweeping uploads failed", "err", err)
			}
			s.metrics.Swept.WithLabelValues("uploads_expired").Add(float64(res.Expired))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
