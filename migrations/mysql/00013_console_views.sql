-- +goose Up
-- The operator console's objects page (SPEC §11): the versions the
-- gateway stored, newest first, a cursor page at a time, all of them or
-- those of one state. Each is one index range scan from the cursor,
-- stopped by the page's LIMIT (ObjectList in ledger/sqlcore/views.go);
-- nothing on a download's way writes to objects, so the two indexes cost
-- only an upload's INSERT.
ALTER TABLE objects ADD KEY objects_stored (stored_at DESC, version_hash DESC);
ALTER TABLE objects ADD KEY objects_state_stored (state, stored_at DESC, version_hash DESC);

-- +goose Down
ALTER TABLE objects DROP KEY objects_state_stored;
ALTER TABLE objects DROP KEY objects_stored;
