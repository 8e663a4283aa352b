package sim

import (
	"bytes"
	"fmt"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
)

// WDBCOwners returns the wdbc schema (pooled standardisation, clip 1, g =
// 22 for the golden comparison) and 5 owners hospital-a..e with iid slices
// of its rows: the deployment the integration and chaos tests share.
func WDBCOwners(noNoise bool) (*schema.Schema, []OwnerConfig, error) {
	data, err := datasets.CSV("wdbc")
	if err != nil {
		return nil, nil, err
	}
	sch, err := schema.Infer(bytes.NewReader(data), "wdbc", "label")
	if err != nil {
		return nil, nil, err
	}
	sch.Bits = 22
	parts, err := Split(data, "label", 5, "iid", 1)
	if err != nil {
		return nil, nil, err
	}
	var owners []OwnerConfig
	for i, p := range parts {
		owners = append(owners, OwnerConfig{ID: fmt.Sprintf("hospital-%c", 'a'+i), Schema: sch, CSV: p,
			Policy: OwnerPolicy(noNoise)})
	}
	return sch, owners, nil
}

// ExactSum is the integer sum of the statistics of several owners' rows
// (CSV) for a job: what a noise-off release must be.
func ExactSum(spec *job.Spec, sch *schema.Schema, rows [][]byte) ([]int64, error) {
	var sum []int64
	for _, csv := range rows {
		acc, _, err := job.ReadStatistics(spec, sch, bytes.NewReader(csv))
		if err != nil {
			return nil, err
		}
		v := acc.Pack()
		if sum == nil {
			sum = make([]int64, len(v))
		}
		for k := range v {
			sum[k] += v[k]
		}
	}
	return sum, nil
}

// IDs returns the owners' IDs.
func IDs(owners []OwnerConfig) []string {
	ids := make([]string, len(owners))
	for i, o := range owners {
		ids[i] = o.ID
	}
	return ids
}
