// Package e2e tests the real gateway binary end to end: three gateway
// processes sharing one MariaDB database and one versitygw bucket (and the
// embedded default, SQLite and the local store, in one process), driven over
// raw TCP and by the download tools people use, curl, wget and aria2c.
//
// The package holds only tests. They build ./cmd/gateway once per test
// binary, start every server they need on free ports, and stop all of them
// in Cleanup. Missing servers or tools skip the tests on a developer's
// machine and fail them under GATEWAY_TEST_STRICT=1 (see internal/testenv).
package e2e
