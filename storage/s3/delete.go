package s3

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlgate/dlgate/storage"
)

var _ deleteAPI = (*s3.Client)(nil)

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
// from a deleted one. Version "null" is deleteNull's.
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
	if v.VersionID == nullVersion {
		return s.deleteNull(ctx, api, bucket, v)
	}
	head := &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(v.Key), VersionId: aws.String(v.VersionID)}
	if _, err := s.api.HeadObject(ctx, head); err != nil {
		return translateVersioned("HeadObject", err, v.VersionID)
	}
	_, err = api.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket:    aws.String(bucket),
		Key:       aws.String(v.Key),
		VersionId: aws.String(v.VersionID),
	})
	return translateVersioned("DeleteObject", err, v.VersionID)
}

// deleteNull removes the version S3 calls "null": the object of a bucket
// without versioning, or one stored before versioning was enabled on its
// bucket (or while it was suspended). As for reads, no VersionId is sent
// at first, since not every S3-compatible server takes "null" for one
// (versitygw does not for a current null version), and the HEAD carries
// If-Match v's ETag, so an object written over v since is refused
// (ErrChanged) rather than deleted in v's place; only an overwrite in the
// instant between the two requests could still be lost.
//
// In a bucket that has versioning now, a DeleteObject without VersionId
// deletes nothing: it hides the current version behind a new delete
// marker (SeaweedFS and versitygw do as S3 does). When the answer says it
// made one, v is deleted by its name, "null", which a server that
// versions the bucket knows, and the marker is deleted again, so that the
// key is left as it was without v. When another version is current, v
// can only be in the key's history, which only its name reaches: a HEAD
// of VersionId "null" with If-Match finds it there (S3, SeaweedFS, and
// versitygw, which moved it among its versions), and otherwise the first
// answer stands (ErrChanged, or ErrNotFound when the current version is a
// real one).
func (s *Store) deleteNull(ctx context.Context, api deleteAPI, bucket string, v storage.Version) error {
	head := &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(v.Key)}
	if v.ETag != "" {
		head.IfMatch = aws.String(v.ETag)
	}
	out, err := s.api.HeadObject(ctx, head)
	var current error // why the current version is not v
	switch {
	case err != nil && classify(err) == storage.ErrChanged:
		current = translate("HeadObject", err)
	case err != nil:
		return translate("HeadObject", err)
	case versionID(out.VersionId) != nullVersion:
		current = fmt.Errorf("s3 delete: %w: the current version is %s, not null", storage.ErrNotFound, versionID(out.VersionId))
	}
	if current != nil {
		head.VersionId = aws.String(nullVersion)
		if _, err := s.api.HeadObject(ctx, head); err != nil {
			if isBadRequest(err) || classify(err) == storage.ErrNotFound {
				return current
			}
			return translate("HeadObject", err)
		}
		return s.deleteObject(ctx, api, bucket, v.Key, nullVersion)
	}
	del, err := api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(v.Key)})
	if err != nil {
		return translate("DeleteObject", err)
	}
	if !aws.ToBool(del.DeleteMarker) {
		return nil
	}
	// A delete marker in v's place: with versioning enabled v is still
	// there beneath it; with versioning suspended the marker is the
	// key's new null version, v's replacement. Either way deleting
	// "null" takes away what stands there now, and an enabled bucket's
	// marker goes after it.
	if err := s.deleteObject(ctx, api, bucket, v.Key, nullVersion); err != nil {
		return err
	}
	if marker := aws.ToString(del.VersionId); marker != "" && marker != nullVersion {
		return s.deleteObject(ctx, api, bucket, v.Key, marker)
	}
	return nil
}

// deleteObject removes version vid of key, by name.
func (s *Store) deleteObject(ctx context.Context, api deleteAPI, bucket, key, vid string) error {
	_, err := api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: aws.String(vid)})
	return translate("DeleteObject", err)
}
