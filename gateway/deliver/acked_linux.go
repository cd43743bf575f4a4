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

// readStream reads the socket's counters as one snapshot. With the
// connection's count of the bytes written (n), one TCP_INFO tells the
// rest (counted). Without it: TCP_INFO (what was acknowledged, the
// connection's state), the send queue (SIOCOUTQ, write_seq − snd_una),
// then TCP_INFO again. The two system calls are not atomic: an
// acknowledgement that arrives between them moves bytes from the queue
// the second read sees to an acknowledged count the first one did not,
// and the reading would say nothing is queued while counting too few
// acknowledged (a whole response recorded as delivered to nobody). So the
// reading counts only when no acknowledgement arrived between the two
// TCP_INFO reads, and is taken again otherwise (nothing else moves these
// numbers: the response's goroutine is the socket's only writer while it
// reads them). Both stay valid after a reset, which frees the queue but
// leaves the sequence numbers.
func readStream(s socket, n WriteCounter) (tcpStream, error) {
	tcpInfo := func() (*unix.TCPInfo, error) { return unix.GetsockoptTCPInfo(s.fd, unix.IPPROTO_TCP, unix.TCP_INFO) }
	if n != nil {
		info, err := tcpInfo()
		if err != nil {
			return tcpStream{}, err
		}
		return counted(info, n.BytesWritten()), nil
	}
	return snapshot(tcpInfo, func() (int, error) { return unix.IoctlGetInt(s.fd, unix.SIOCOUTQ) })
}

// counted is the stream that one TCP_INFO reading and written, the bytes
// handed to the socket since the connection began, tell: one system
// call, whose numbers the kernel reads under the socket's lock, so that
// no acknowledgement falls between them; and written moves only when the
// response's goroutine, which reads it, writes. tcpi_bytes_acked counts
// the acknowledged data from the connection's first byte, as written
// does (the handshake is not counted), plus one for this side's FIN once
// acknowledged, which the minimum takes off.
func counted(info *unix.TCPInfo, written int64) tcpStream {
	acked := min(int64(info.Bytes_acked), written)
	queued := written - acked
	return tcpStream{
		written:     written,
		acked:       acked,
		transmitted: written - min(int64(info.Notsent_bytes), queued),
		reset:       info.State == tcpClose,
		peerClosed:  info.State == tcpCloseWait,
	}
}

// snapshotTries bounds how often snapshot reads the counters again.
// Acknowledgements of one connection arrive microseconds apart at most,
// so a second try nearly always holds; past the last, the reading is
// the one that errs low on written (TCP_INFO before the queue).
const snapshotTries = 8

// snapshot is readStream over the two reads it makes.
func snapshot(tcpInfo func() (*unix.TCPInfo, error), sendQueue func() (int, error)) (tcpStream, error) {
	info, err := tcpInfo()
	if err != nil {
		return tcpStream{}, err
	}
	var outq int
	for try := 1; ; try++ {
		if outq, err = sendQueue(); err != nil {
			return tcpStream{}, err
		}
		again, err := tcpInfo()
		if err != nil {
			return tcpStream{}, err
		}
		if again.Bytes_acked == info.Bytes_acked || try == snapshotTries {
			break
		}
		info = again
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
