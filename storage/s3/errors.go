package s3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/aws/smithy-go"

	"github.com/dlgate/dlgate/storage"
)

// translate maps an SDK error from operation op to the storage error it
// means, keeping err for logs:
//
//   - NoSuchKey, NoSuchVersion, NotFound (a HEAD's 404), any 404:
//     storage.ErrNotFound
//   - PreconditionFailed (412, If-Match lost) and InvalidRange (416, the
//     object is shorter than pinned): storage.ErrChanged
//   - a passed deadline or a network timeout: storage.ErrTimeout
//   - anything else the server or the network says (5xx, 403, connection
//     refused, reset): storage.ErrUnavailable
//
// A canceled context is returned wrapped but untranslated: the caller gave
// up, the store did not fail.
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if domain := classify(err); domain != nil {
		return fmt.Errorf("s3 %s: %w: %w", op, domain, err)
	}
	return fmt.Errorf("s3 %s: %w", op, err)
}

// translateVersioned is translate for a read of version vid. When a
// VersionId was sent, a 400 can only be about it (key, bucket and range are
// checked before sending), and a version id the server calls invalid names
// no version: storage.ErrNotFound, as for one that is well formed but
// absent. Version ids reach here from the admin API, so this is user input.
func translateVersioned(op string, err error, vid string) error {
	if err != nil && versionParam(vid) != nil && isBadRequest(err) {
		return fmt.Errorf("s3 %s: %w: version id refused: %w", op, storage.ErrNotFound, err)
	}
	return translate(op, err)
}

func isBadRequest(err error) bool {
	var statusErr interface{ HTTPStatusCode() int }
	return errors.As(err, &statusErr) && statusErr.HTTPStatusCode() == http.StatusBadRequest
}

func classify(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return storage.ErrTimeout
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "NoSuchKey", "NoSuchVersion", "NotFound":
			return storage.ErrNotFound
		case "PreconditionFailed", "InvalidRange":
			return storage.ErrChanged
		}
	}
	var statusErr interface{ HTTPStatusCode() int }
	if errors.As(err, &statusErr) {
		switch statusErr.HTTPStatusCode() {
		case http.StatusNotFound:
			return storage.ErrNotFound
		case http.StatusPreconditionFailed, http.StatusRequestedRangeNotSatisfiable:
			return storage.ErrChanged
		}
		return storage.ErrUnavailable
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return storage.ErrTimeout
	}
	return storage.ErrUnavailable
}
