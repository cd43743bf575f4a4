package storagetest

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/dlgate/dlgate/storage"
)

// BenchSizes are the upload sizes BenchmarkPut measures in each store.
var BenchSizes = []int64{64 << 20, 1 << 30}

// BenchmarkPut measures Put's throughput for each of BenchSizes, from a
// request-like body (Read only, unknown length) that costs next to
// nothing to produce: what is timed is the store's work. Run it with the
// store hashing (with) and without (without); the Put of each is deleted
// again when the store can, so that 1 GiB runs do not fill the disk.
// Beside the wall time it reports cpu-ms/op, this process's CPU time per
// Put.
func BenchmarkPut(b *testing.B, with, without storage.Store, bucket string) {
	for _, size := range BenchSizes {
		for _, c := range []struct {
			name string
			st   storage.Store
		}{{"sha256=on", with}, {"sha256=off", without}} {
			b.Run(fmt.Sprintf("size=%dMiB/%s", size>>20, c.name), func(b *testing.B) {
				b.SetBytes(size)
				var cpu time.Duration
				for b.Loop() {
					start := processCPU()
					v, err := c.st.Put(b.Context(), bucket, "bench.bin", OnlyReader(io.LimitReader(&cycle{}, size)), -1, "")
					cpu += processCPU() - start
					if err != nil {
						b.Fatalf("Put(%d bytes) = %v", size, err)
					}
					if d, ok := c.st.(storage.Deleter); ok {
						b.StopTimer()
						if err := d.Delete(b.Context(), v); err != nil {
							b.Fatalf("Delete = %v", err)
						}
						b.StartTimer()
					}
				}
				// What the Put cost this process's cores, whatever else
				// the machine was doing: the wall time above also waits
				// for the disk, the server and other processes.
				b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
			})
		}
	}
}

// cycleBlock is what cycle repeats: random, so no layer can compress it.
var cycleBlock = func() []byte {
	b, _ := io.ReadAll(PseudoRandom(99, 1<<20))
	return b
}()

// cycle reads cycleBlock over and over.
type cycle struct{ off int }

func (c *cycle) Read(p []byte) (int, error) {
	n := copy(p, cycleBlock[c.off:])
	c.off = (c.off + n) % len(cycleBlock)
	return n, nil
}
