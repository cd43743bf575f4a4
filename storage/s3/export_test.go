package s3

// WithoutDigest makes Put leave out the whole object's SHA-256 (each
// request's checksum stays), for BenchmarkPut's comparison.
func WithoutDigest() Option { return func(s *Store) { s.noDigest = true } }
