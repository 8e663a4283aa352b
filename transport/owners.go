package transport

import (
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
