package fs

// WithoutDigest makes Put leave out the SHA-256, for BenchmarkPut's
// comparison.
func WithoutDigest() Option { return func(s *Store) { s.noDigest = true } }
