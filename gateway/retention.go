package gateway

import (
	"context"

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
			dctx, cancel := context.WithTimeout(ctx, storeDeleteTimeout)
			err := s.deleteVersion(dctx, deleter, d)
			cancel()
			if err != nil {
				s.metrics.swept.WithLabelValues("object_deletions_failed").Inc()
				s.log.WarnContext(ctx, "retention: object deletion failed; retried later", "key", d.Object.Key,
					"version_id", d.Object.VersionID, "attempts", d.Attempts+1, "err", err)
				continue
			}
			s.metrics.swept.WithLabelValues("objects_deleted").Inc()
			s.log.InfoContext(ctx, "retention: object deleted", "key", d.Object.Key, "version_id", d.Object.VersionID,
				"bytes", d.Object.Size)
		}
		if len(ds) < retentionBatch {
			return
		}
	}
}

// purgeAudit deletes links dead for AuditRetention, with their grants and
// sessions, and the tombstones of versions deleted as long ago. 0 keeps
// everything.
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
		s.metrics.swept.WithLabelValues("links_purged").Add(float64(res.Links))
		s.metrics.swept.WithLabelValues("tombstones_purged").Add(float64(res.Tombstones))
		if res.Links > 0 || res.Tombstones > 0 {
			s.log.InfoContext(ctx, "retention: purged", "links", res.Links, "tombstones", res.Tombstones)
		}
		if res.Links < retentionBatch && res.Tombstones < retentionBatch {
			return
		}
	}
}
