package s3

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlgate/dlgate/storage"
)

// Stat returns the metadata of ref's version (HeadObject), or of the
// current version when ref.VersionID is empty. VersionID is "null" for an
// object in a bucket without versioning. SHA256 is the server's
// full-object SHA-256 checksum when the object has one (HeadObject in
// checksum mode), and "" otherwise: an object stored without a checksum,
// with another algorithm, or in parts (a COMPOSITE checksum is a digest of
// the parts' digests, not of the object). Errors: storage.ErrInvalidKey,
// storage.ErrNotFound, storage.ErrInvalid, storage.ErrTimeout,
// storage.ErrUnavailable.
func (s *Store) Stat(ctx context.Context, ref storage.Ref) (storage.Version, error) {
	bucket, err := s.resolve(ref.Bucket, ref.Key)
	if err != nil {
		return storage.Version{}, err
	}
	in := &s3.HeadObjectInput{
		Bucket:       aws.String(bucket),
		Key:          aws.String(ref.Key),
		VersionId:    versionParam(ref.VersionID),
		ChecksumMode: types.ChecksumModeEnabled,
	}
	out, err := s.api.HeadObject(ctx, in)
	if isForbidden(err) {
		// AWS wants kms:Decrypt to show the checksum of an object
		// encrypted with a KMS key; without it the object is still the
		// caller's to link, only without a digest.
		in.ChecksumMode = ""
		out, err = s.api.HeadObject(ctx, in)
	}
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
		SHA256:       fullObjectSHA256(out),
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

// fullObjectSHA256 is the hex SHA-256 of the whole object from a
// HeadObject in checksum mode, or "".
//
// A FULL_OBJECT checksum is the object's. A server that names no checksum
// type (SeaweedFS, older S3-compatible ones) is trusted for a single-part
// object only, whose checksum AWS defines as the full object's ("For
// PutObject uploads, the checksum type is always FULL_OBJECT": Amazon S3
// API Reference, PutObject, x-amz-checksum-type; the COMPOSITE type exists
// for multipart uploads, "Checking object integrity" in the Amazon S3 User
// Guide). An object is taken as multipart when either its ETag or its
// checksum ends in "-N", the count of its parts, as S3 writes both for a
// multipart upload: a composite checksum is never mistaken for the
// object's digest.
func fullObjectSHA256(out *s3.HeadObjectOutput) string {
	v := aws.ToString(out.ChecksumSHA256)
	switch {
	case v == "":
		return ""
	case out.ChecksumType == types.ChecksumTypeFullObject:
	case out.ChecksumType == "" && !multipartShaped(v) && !multipartShaped(strings.Trim(aws.ToString(out.ETag), `"`)):
	default:
		return ""
	}
	sum, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(sum) != 32 {
		return ""
	}
	return hex.EncodeToString(sum)
}

// multipartShaped reports whether s, an ETag without its quotes or a
// checksum, ends in "-N" as S3 marks those of a multipart upload.
func multipartShaped(s string) bool {
	i := strings.LastIndexByte(s, '-')
	if i < 0 || i == len(s)-1 {
		return false
	}
	_, err := strconv.ParseUint(s[i+1:], 10, 32)
	return err == nil
}

// isForbidden reports whether err is the server's 403.
func isForbidden(err error) bool {
	var statusErr interface{ HTTPStatusCode() int }
	return errors.As(err, &statusErr) && statusErr.HTTPStatusCode() == http.StatusForbidden
}
