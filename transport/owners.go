package transport

import (
	"fmt"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
)

// OwnerRefs is a job's owner list on the wire.
func OwnerRefs(owners []job.Owner) []*fedpcav1.OwnerRef {
	out := make([]*fedpcav1.OwnerRef, len(owners))
	for i, o := range owners {
		out[i] = &fedpcav1.OwnerRef{Id: o.ID, Key: o.Key}
	}
	return out
}

// Owners is a job's owner list from the wire (checked by whoever receives
// it against the spec: job.Spec.CheckOwners).
func Owners(refs []*fedpcav1.OwnerRef) []job.Owner {
	out := make([]job.Owner, len(refs))
	for i, r := range refs {
		out[i] = job.Owner{ID: r.GetId(), Key: r.GetKey()}
	}
	return out
}

// DeclineDetail is a decline's detail from the wire (validate it with
// job.DeclineDetail.Validate).
func DeclineDetail(w *fedpcav1.DeclineDetail) job.DeclineDetail {
	return job.DetailOf(int32(w.GetLimit()), w.GetLimitValue(), w.GetSchemaField(), w.GetFeature(), w != nil && w.Feature != nil)
}

// ExplainDecline is "(CODE): what the owner said" of a declined owner
// (features: the job's, to name the one a schema field belongs to).
func ExplainDecline(d *fedpcav1.DeclinedOwner, features []string) string {
	code := job.Decline(d.GetReason())
	return fmt.Sprintf("(%s): %s", code, code.Explain(DeclineDetail(d.GetDetail()), features))
}
