//go:build !linux

package deliver

import (
	"errors"
	"syscall"
)

var errNoTCPInfo = errors.New("gateway: no TCP send-queue counters on this platform")

// readStream has no counters to read here: a session response that ends
// early is charged all it wrote, as before.
func readStream(syscall.RawConn) (tcpStream, error) { return tcpStream{}, errNoTCPInfo }
