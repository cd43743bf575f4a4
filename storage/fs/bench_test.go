package fs_test

import (
	"testing"

	"github.com/dlgate/dlgate/storage/fs"
	"github.com/dlgate/dlgate/storage/storagetest"
)

// BenchmarkPut compares uploads with and without the SHA-256:
//
//	go test -run '^$' -bench Put -benchtime 3x ./storage/fs/
func BenchmarkPut(b *testing.B) {
	dir := b.TempDir()
	with, err := fs.New(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer with.Close()
	without, err := fs.New(dir, fs.WithoutDigest())
	if err != nil {
		b.Fatal(err)
	}
	defer without.Close()
	storagetest.BenchmarkPut(b, with, without, "")
}
