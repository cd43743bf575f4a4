//go:build !unix

package fs

import (
	"errors"
	"os"
)

// openLeaf has no fast way here: the caller opens through the store's
// root.
func openLeaf(d *os.File, dir, name string) (*os.File, error) { return nil, errors.ErrUnsupported }
