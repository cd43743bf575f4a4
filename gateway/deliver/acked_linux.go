package deliver

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Linux TCP states (include/net/tcp_states.h).
const (
	tcpClose     = 7
	tcpCloseWait = 8
)

// tcpInfoUsable: tcpi_bytes_acked came with Linux 4.1, tcpi_notsent_bytes
// with 4.6; an older kernel leaves them zero, which would read as
// "nothing carried". Such a kernel falls back to charging what was
// written.
var tcpInfoUsable = sync.OnceValue(func() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	major, minor, ok := kernelVersion(unix.ByteSliceToString(u.Release[:]))
	return ok && (major > 4 || major == 4 && minor >= 6)
})

// kernelVersion parses "6.1.0-18-amd64" into 6, 1.
func kernelVersion(release string) (major, minor int, ok bool) {
	a, rest, _ := strings.Cut(release, ".")
	b, _, _ := strings.Cut(rest, ".")
	b, _, _ = strings.Cut(b, "-")
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	return x, y, err1 == nil && err2 == nil
}

var errNoTCPInfo = errors.New("gateway: kernel too old for tcpi_bytes_acked and tcpi_notsent_bytes")

// socket is a descriptor of a connection's socket of its own (a
// duplicate, close-on-exec), outside Go's poller: reading its counters
// needs no lock of the connection, and works after the connection's own
// descriptor was closed.
type socket struct{ fd int }

// dupSocket duplicates the descriptor of rc. Errors: errNoTCPInfo on a
// kernel without the counters, the system call's.
func dupSocket(rc syscall.RawConn) (socket, error) {
	if !tcpInfoUsable() {
		return socket{}, errNoTCPInfo
	}
	fd := -1
	var err error
	cerr := rc.Control(func(orig uintptr) { fd, err = unix.FcntlInt(orig, unix.F_DUPFD_CLOEXEC, 0) })
	if cerr != nil {
		return socket{}, cerr
	}
	if err != nil {
		return socket{}, err
	}
	return socket{fd: fd}, nil
}

func (s socket) close() { unix.Close(s.fd) } //nolint:errcheck // a duplicate: nothing was written through it

// readStream reads the socket's counters: TCP_INFO first, then the
// send queue (SIOCOUTQ, write_seq − snd_una). Acknowledgements arriving
// between the two only move bytes from the queue to the acknowledged
// count, so written can come out low, never high: a response's start
// read too early charges more, never less, and counts fewer of its bytes
// acknowledged, never more. acked is tcpi_bytes_acked as TCP_INFO read
// it, so it never runs ahead of written. Both stay valid after a reset,
// which frees the queue but leaves the sequence numbers.
func readStream(s socket) (tcpStream, error) {
	info, err := unix.GetsockoptTCPInfo(s.fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return tcpStream{}, err
	}
	outq, err := unix.IoctlGetInt(s.fd, unix.SIOCOUTQ)
	if err != nil {
		return tcpStream{}, err
	}
	acked := int64(info.Bytes_acked)
	written := acked + int64(outq)
	return tcpStream{
		written:     written,
		acked:       acked,
		transmitted: written - int64(min(int64(info.Notsent_bytes), int64(outq))),
		reset:       info.State == tcpClose,
		peerClosed:  info.State == tcpCloseWait,
	}, nil
}
