package deliver

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestKernelVersion(t *testing.T) {
	for _, tc := range []struct {
		in           string
		major, minor int
		ok           bool
	}{
		{"6.1.0-18-amd64", 6, 1, true},
		{"4.6", 4, 6, true},
		{"5.15.0-1051-azure", 5, 15, true},
		{"3.10.0-1160.el7.x86_64", 3, 10, true},
		{"weird", 0, 0, false},
	} {
		if major, minor, ok := kernelVersion(tc.in); major != tc.major || minor != tc.minor || ok != tc.ok {
			t.Errorf("kernelVersion(%q) = %d, %d, %v, want %d, %d, %v", tc.in, major, minor, ok, tc.major, tc.minor, tc.ok)
		}
	}
}

// An acknowledgement that arrives between the two system calls of a
// reading must not make a stale acknowledged count look like everything
// acknowledged: that recorded whole responses as delivered to nobody
// (about 1 in 800 GETs of a 1 KiB object at 64 concurrent clients). The
// reading is taken again until TCP_INFO agrees before and after the
// queue.
func TestSnapshotRereadsWhenAnAcknowledgementArrivesBetweenTheReads(t *testing.T) {
	const headers, body = 300, 1024
	// The socket: headers acknowledged, the body written and in flight;
	// its acknowledgement lands right after the first TCP_INFO.
	acked, queued := int64(headers), int64(body)
	infos := 0
	st, err := snapshot(
		func() (*unix.TCPInfo, error) {
			infos++
			info := &unix.TCPInfo{Bytes_acked: uint64(acked), State: 1}
			if infos == 1 {
				acked, queued = headers+body, 0
			}
			return info, nil
		},
		func() (int, error) { return int(queued), nil })
	if err != nil {
		t.Fatal(err)
	}
	if st.written != headers+body || st.acked != headers+body || st.transmitted != headers+body {
		t.Errorf("snapshot = written %d, acked %d, transmitted %d; want %d for each (all acknowledged)", st.written, st.acked, st.transmitted, headers+body)
	}
	if infos != 3 {
		t.Errorf("TCP_INFO read %d times, want 3 (one more for the reading that moved)", infos)
	}

	// A steady socket is one reading: TCP_INFO twice around the queue.
	infos = 0
	st, err = snapshot(
		func() (*unix.TCPInfo, error) { infos++; return &unix.TCPInfo{Bytes_acked: headers, State: 1}, nil },
		func() (int, error) { return body, nil })
	if err != nil || infos != 2 || st.written != headers+body || st.acked != headers {
		t.Errorf("steady socket: %+v, %v after %d TCP_INFO reads; want written %d, acked %d after 2", st, err, infos, headers+body, headers)
	}
}

// A socket whose acknowledged count moves at every read still gives an
// answer after snapshotTries, the one that errs low on written.
func TestSnapshotGivesUpAfterItsTries(t *testing.T) {
	var acked uint64
	infos := 0
	st, err := snapshot(
		func() (*unix.TCPInfo, error) {
			infos++
			acked += 10
			return &unix.TCPInfo{Bytes_acked: acked, State: 1}, nil
		},
		func() (int, error) { return 100, nil })
	if err != nil {
		t.Fatal(err)
	}
	if infos != snapshotTries+1 {
		t.Errorf("TCP_INFO read %d times, want %d", infos, snapshotTries+1)
	}
	if want := int64(acked) - 10; st.acked != want || st.written != want+100 {
		t.Errorf("snapshot = acked %d, written %d; want the reading before the queue: %d, %d", st.acked, st.written, want, want+100)
	}
}

// One TCP_INFO and the count written: the queue is what was written and
// not acknowledged, of which notsent never left; this side's FIN, once
// acknowledged, is not a byte of the stream.
func TestACountedReading(t *testing.T) {
	for _, c := range []struct {
		name                       string
		info                       unix.TCPInfo
		written                    int64
		wantAcked, wantTransmitted int64
		reset, peerClosed, all     bool
	}{
		{"all acknowledged", unix.TCPInfo{Bytes_acked: 5000, State: 1}, 5000, 5000, 5000, false, false, true},
		{"in flight and queued", unix.TCPInfo{Bytes_acked: 1000, Notsent_bytes: 3000, State: 1}, 5000, 1000, 2000, false, false, false},
		{"our FIN acknowledged", unix.TCPInfo{Bytes_acked: 5001, State: 7}, 5000, 5000, 5000, true, false, true},
		{"reset with bytes queued", unix.TCPInfo{Bytes_acked: 1000, Notsent_bytes: 2500, State: 7}, 5000, 1000, 2500, true, false, false},
		{"peer sent its FIN", unix.TCPInfo{Bytes_acked: 4000, State: 8}, 5000, 4000, 5000, false, true, false},
		{"notsent above the queue", unix.TCPInfo{Bytes_acked: 4000, Notsent_bytes: 9000, State: 1}, 5000, 4000, 4000, false, false, false},
	} {
		st := counted(&c.info, c.written)
		if st.written != c.written || st.acked != c.wantAcked || st.transmitted != c.wantTransmitted ||
			st.reset != c.reset || st.peerClosed != c.peerClosed || (st.acked == st.written) != c.all {
			t.Errorf("%s: %+v, want written %d, acked %d, transmitted %d, reset %v, peer closed %v, all acknowledged %v",
				c.name, st, c.written, c.wantAcked, c.wantTransmitted, c.reset, c.peerClosed, c.all)
		}
	}
}
