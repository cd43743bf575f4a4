package s3

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlgate/dlgate/storage"
)

// Stat returns the metadata of ref's version (HeadObject), or of the
// current version when ref.VersionID is empty. VersionID is "null" for an
// object in a bucket without versioning. Errors: storage.ErrInvalidKey,
// storage.ErrNotFound, storage.ErrInvalid, storage.ErrTimeout,
// storage.ErrUnavailable.
func (s *Store) Stat(ctx context.Context, ref storage.Ref) (storage.Version, error) {
	bucket, err := s.resolve(ref.Bucket, ref.Key)
	if err != nil {
		return storage.Version{}, err
	}
	out, err := s.api.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket:    aws.String(bucket),
		Key:       aws.String(ref.Key),
		VersionId: versionParam(ref.VersionID),
	})
	if err != nil {
		return storage.Version{}, translateVersioned("HeadObject", err, ref.VersionID)
	}
	v := storage.Version{
		Bucket:       bucket,
		Key:          ref.Key,
		VersionID:    versionID(out.VersionId),
		Size:         aws.ToInt64(out.ContentLength),
		ETag:         aws.ToString(out.ETag),
		ContentType:  aws.ToString(out.ContentType),
		LastModified: aws.ToTime(out.LastModified).UTC(),
	}
	if ref.VersionID == nullVersion && v.VersionID != nullVersion {
		// versionParam sent no VersionId, so the server answered with the
		// current version, which is not the null version asked for.
		return storage.Version{}, fmt.Errorf("s3 HeadObject: %w: the current version is %s, not null", storage.ErrNotFound, v.VersionID)
	}
	if v.ETag == "" || out.ContentLength == nil {
		// Without both, a link could not be pinned or served.
		return storage.Version{}, fmt.Errorf("s3 HeadObject: %w: response without ETag or Content-Length", storage.ErrUnavailable)
	}
	return v, nil
}
