//go:build !linux

package deliver

import (
	"errors"
	"syscall"
)

var errNoTCPInfo = errors.New("gateway: no TCP send-queue counters on this platform")

// socket stands for a connection's socket where none can be read.
type socket struct{}

// dupSocket has no counters to read here: a session response that ends
// early is charged all it wrote, and its delivery is what it wrote,
// unmeasured.
func dupSocket(syscall.RawConn) (socket, error) { return socket{}, errNoTCPInfo }

func readStream(socket, WriteCounter) (tcpStream, error) { return tcpStream{}, errNoTCPInfo }

func (socket) close() {}
