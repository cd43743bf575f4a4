//go:build unix

package fs

import (
	"errors"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// openLeaf opens the file name (one path component) of the directory d
// for reading: one openat(2) relative to d's descriptor, with O_NOFOLLOW,
// made an *os.File by os.NewFile. os.Root.OpenFile, which it replaces on
// the cached directories, hands a regular file to Go's poller first: on
// Linux four fcntl calls and an epoll_ctl that fails, as many system calls
// as the rest of a 64 KiB session range's open (openat, fstat). A symbolic
// link, or anything else openat refuses here, is an error, and the caller
// goes through the store's root, which follows links that stay inside it.
func openLeaf(d *os.File, dir, name string) (*os.File, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return nil, &os.PathError{Op: "openat", Path: name, Err: errors.ErrUnsupported}
	}
	rc, err := d.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var oerr error
	// Control holds d's descriptor open for the call, even against an
	// eviction closing d meanwhile.
	if err := rc.Control(func(dfd uintptr) {
		for {
			fd, oerr = unix.Openat(int(dfd), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
			if !errors.Is(oerr, unix.EINTR) {
				return
			}
		}
	}); err != nil {
		return nil, err
	}
	if oerr != nil {
		return nil, &os.PathError{Op: "openat", Path: dir + "/" + name, Err: oerr}
	}
	return os.NewFile(uintptr(fd), dir+"/"+name), nil
}
