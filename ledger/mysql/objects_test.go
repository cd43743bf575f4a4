package mysql_test

import (
	"testing"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger/ledgertest"
)

func TestObjectsAcrossProcesses(t *testing.T) {
	ledgertest.ExerciseObjectsAcrossProcesses(t, processesOn(testenv.SharedMariaDB(t), false))
}
