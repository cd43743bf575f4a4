package s3

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlgate/dlgate/storage"
)

var (
	_ storage.Deleter = (*Store)(nil)
	_ deleteAPI       = (*s3.Client)(nil)
)

// deleteAPI is the S3 call Delete makes beyond API. *s3.Client has it; a
// test's fake of API without it makes Delete fail as unavailable.
type deleteAPI interface {
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

// Delete removes version v: a HEAD of that exact version, then a
// DeleteObject naming its VersionId, which removes the version itself (no
// delete marker) and leaves every other version of the key as it was.
//
// The HEAD is there because S3 answers 204 to a DeleteObject of a version
// that does not exist: without it a missing version could not be told
// from a deleted one. For version "null" (a bucket without versioning)
// no VersionId is sent, as for reads, and the HEAD carries If-Match v's
// ETag, so an object written over v since is refused (ErrChanged) rather
// than deleted in v's place; only an overwrite in the instant between the
// two requests could still be lost.
//
// Errors: storage.ErrNotFound, storage.ErrChanged, storage.ErrInvalidKey,
// storage.ErrInvalid, storage.ErrTimeout, storage.ErrUnavailable.
func (s *Store) Delete(ctx context.Context, v storage.Version) error {
	bucket, err := s.resolve(v.Bucket, v.Key)
	if err != nil {
		return err
	}
	if v.VersionID == "" {
		// Without a version id S3 would delete the current version, or
		// hide it behind a delete marker: never what a caller named.
		return fmt.Errorf("s3 delete: %w: no version id", storage.ErrNotFound)
	}
	api, ok := s.api.(deleteAPI)
	if !ok {
		return fmt.Errorf("s3 delete: %w: the client cannot delete objects", storage.ErrUnavailable)
	}
	head := &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(v.Key), VersionId: versionParam(v.VersionID)}
	if head.VersionId == nil && v.ETag != "" {
		head.IfMatch = aws.String(v.ETag)
	}
	out, err := s.api.HeadObject(ctx, head)
	if err != nil {
		return translateVersioned("HeadObject", err, v.VersionID)
	}
	if v.VersionID == nullVersion && versionID(out.VersionId) != nullVersion {
		// No VersionId was sent, so the answer is the current version,
		// and it is not the null version asked for.
		return fmt.Errorf("s3 delete: %w: the current version is %s, not null", storage.ErrNotFound, versionID(out.VersionId))
	}
	_, err = api.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket:    aws.String(bucket),
		Key:       aws.String(v.Key),
		VersionId: versionParam(v.VersionID),
	})
	return translateVersioned("DeleteObject", err, v.VersionID)
}
