package sqlite_test

import (
	"testing"

	"github.com/dlgate/dlgate/ledger/ledgertest"
)

func TestObjectsAcrossProcesses(t *testing.T) {
	ledgertest.ExerciseObjectsAcrossProcesses(t, processes)
}
