package chaos

import (
	"bytes"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/sim"
)

// wdbcOwners returns sim.WDBCOwners' schema and owners.
func wdbcOwners(t *testing.T, noNoise bool) (*schema.Schema, []sim.OwnerConfig) {
	t.Helper()
	sch, owners, err := sim.WDBCOwners(noNoise)
	if err != nil {
		t.Fatal(err)
	}
	return sch, owners
}

// testLogger logs to the test with -v, nowhere without.
func testLogger(t *testing.T) hclog.Logger {
	if !testing.Verbose() {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Info, Output: testWriter{t}})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}
