package s3

import (
	"context"
	"errors"
	"fmt"
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
//   - BadDigest and XAmzContentSHA256Mismatch (an upload's checksum or
//     signed payload hash did not match the bytes that arrived):
//     storage.ErrUnavailable
//   - KeyTooLong (versitygw: KeyTooLongError), InvalidObjectName,
//     InvalidBucketName, versitygw's ExistingObjectIsDirectory,
//     ObjectParentIsFile and DirectoryObjectContainsData, and 414 URI Too
//     Long: storage.ErrInvalidKey
//   - any other 400 (InvalidArgument, EntityTooLarge, …) and 413:
//     storage.ErrInvalid, the request's fault rather than the store's
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
// VersionId was sent, a 400 that names neither key nor bucket can only be
// about it (key, bucket and range are checked before sending), and a
// version id the server calls invalid names no version:
// storage.ErrNotFound, as for one that is well formed but absent. Version ids reach here from the admin API, so this is user input.
func translateVersioned(op string, err error, vid string) error {
	if err != nil && versionParam(vid) != nil && isBadRequest(err) && classify(err) == storage.ErrInvalid {
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
		case "BadDigest", "XAmzContentSHA256Mismatch":
			// The body's checksum (or signed payload hash) did not match
			// what arrived: bytes damaged on the way, which a new
			// attempt can get through, not a request to refuse.
			return storage.ErrUnavailable
		case "KeyTooLong", "KeyTooLongError", "InvalidObjectName", "InvalidBucketName",
			// A store on a POSIX file system (versitygw) cannot hold a
			// key that is both an object and a "directory" of others,
			// nor bytes under a key ending in "/", its directory.
			"ExistingObjectIsDirectory", "ObjectParentIsFile", "DirectoryObjectContainsData":
			return storage.ErrInvalidKey
		}
	}
	var statusErr interface{ HTTPStatusCode() int }
	// Status 0 is no answer at all: the SDK wraps a read that timed out
	// before the response headers that way too, so it is judged below.
	if errors.As(err, &statusErr) && statusErr.HTTPStatusCode() != 0 {
		switch statusErr.HTTPStatusCode() {
		case http.StatusNotFound:
			return storage.ErrNotFound
		case http.StatusPreconditionFailed, http.StatusRequestedRangeNotSatisfiable:
			return storage.ErrChanged
		case http.StatusRequestURITooLong:
			return storage.ErrInvalidKey
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			// The store judged the request, and found it wanting: a
			// client error the caller must hear as such, not a 502.
			return storage.ErrInvalid
		}
		return storage.ErrUnavailable
	}
	// net.Error, and the SDK's ResponseTimeoutError for a silent
	// connection (which has Timeout but not Temporary).
	var timeoutErr interface{ Timeout() bool }
	if errors.As(err, &timeoutErr) && timeoutErr.Timeout() {
		return storage.ErrTimeout
	}
	return storage.ErrUnavailable
}
