package gateway

import (
	"os"
	"sync"
)

// verifiedFiles remembers the stored files whose whole bytes this process
// hashed to their version's SHA-256, by the file's identity (device,
// inode, size, modification and change times), so that the next whole
// download of the same unchanged file is not hashed again: the check costs
// CPU that sendfile does not (about half the throughput of one stream on
// two cores). Writing to the file, or replacing it, changes its identity,
// and the next download checks it again; a change below the file system
// (bit rot with no write) is caught only by the first download of each
// process. docs/design.md, "Verified downloads", says so.
type verifiedFiles struct {
	mu sync.Mutex
	m  map[fileID]struct{}
}

// fileID identifies a file and its last change.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds
}

// verifiedFilesSize bounds the set; a full set drops one at random.
const verifiedFilesSize = 4096

func (v *verifiedFiles) has(f *os.File) (fileID, bool, bool) {
	id, ok := fileIdentity(f)
	if !ok {
		return id, false, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	_, seen := v.m[id]
	return id, true, seen
}

func (v *verifiedFiles) add(id fileID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = make(map[fileID]struct{})
	}
	if len(v.m) >= verifiedFilesSize {
		for k := range v.m {
			delete(v.m, k)
			break
		}
	}
	v.m[id] = struct{}{}
}
