package s3_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/storage/s3"
	"github.com/dlgate/dlgate/storage/storagetest"
)

func TestDeleteOfANullVersionRefusesAReplacedObject(t *testing.T) {
	eachServer(t, func(t *testing.T, env *testenv.S3) {
		st, bucket := MustStore(t, env, false)
		first := storagetest.MustPut(t, st, bucket, "k", []byte("first"), "")
		second := storagetest.MustPut(t, st, bucket, "k", []byte("other"), "")
		if first.VersionID != "null" || second.VersionID != "null" {
			t.Fatalf("versions on a bucket without versioning: %q, %q; want null", first.VersionID, second.VersionID)
		}
		if err := st.Delete(t.Context(), first); !errors.Is(err, storage.ErrChanged) {
			t.Fatalf("Delete(replaced null version) = %v, want ErrChanged", err)
		}
		if b := storagetest.MustRead(t, st, second, 0, second.Size); string(b) != "other" {
			t.Fatalf("the object written over it reads %q after the refused deletion", b)
		}
		if err := st.Delete(t.Context(), second); err != nil {
			t.Fatalf("Delete(current null version) = %v", err)
		}
		if _, err := st.Stat(t.Context(), storage.Ref{Bucket: bucket, Key: "k"}); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("Stat after deleting the null version = %v, want ErrNotFound", err)
		}
	})
}

func TestDeleteNamesTheVersionAndChecksItFirst(t *testing.T) {
	var head *awss3.HeadObjectInput
	api := &deletingAPI{fakeAPI: fakeAPI{headObject: func(in *awss3.HeadObjectInput) (*awss3.HeadObjectOutput, error) {
		head = in
		return &awss3.HeadObjectOutput{VersionId: in.VersionId, ETag: aws.String(`"e"`), ContentLength: aws.Int64(1)}, nil
	}}}
	st := s3.NewFromClient(api, "bucket")
	if err := st.Delete(t.Context(), storage.Version{Key: "k", VersionID: "v-1", ETag: `"e"`}); err != nil {
		t.Fatal(err)
	}
	if aws.ToString(head.VersionId) != "v-1" || head.IfMatch != nil {
		t.Errorf("HeadObject = version %q If-Match %v; want version v-1 without If-Match", aws.ToString(head.VersionId), head.IfMatch)
	}
	if api.deleted == nil || aws.ToString(api.deleted.Bucket) != "bucket" || aws.ToString(api.deleted.Key) != "k" || aws.ToString(api.deleted.VersionId) != "v-1" {
		t.Errorf("DeleteObject = %+v, want bucket/k version v-1", api.deleted)
	}

	missing := &deletingAPI{fakeAPI: fakeAPI{headObject: func(*awss3.HeadObjectInput) (*awss3.HeadObjectOutput, error) {
		return nil, apiError("HeadObject", 404, "NotFound")
	}}}
	err := s3.NewFromClient(missing, "bucket").Delete(t.Context(), storage.Version{Key: "k", VersionID: "v-1"})
	if !errors.Is(err, storage.ErrNotFound) || missing.deleted != nil {
		t.Errorf("Delete(missing version) = %v, DeleteObject sent: %v; want ErrNotFound and no DeleteObject", err, missing.deleted != nil)
	}
}

func TestDeleteWithAClientThatCannotDeleteIsUnavailable(t *testing.T) {
	st := s3.NewFromClient(&fakeAPI{}, "bucket")
	if err := st.Delete(t.Context(), storage.Version{Key: "k", VersionID: "v-1"}); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Delete through a client without DeleteObject = %v, want ErrUnavailable", err)
	}
}

// deletingAPI is fakeAPI with DeleteObject, which records its input.
type deletingAPI struct {
	fakeAPI
	deleted *awss3.DeleteObjectInput
}

func (f *deletingAPI) DeleteObject(_ context.Context, in *awss3.DeleteObjectInput, _ ...func(*awss3.Options)) (*awss3.DeleteObjectOutput, error) {
	f.deleted = in
	return &awss3.DeleteObjectOutput{}, nil
}
