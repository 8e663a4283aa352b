package proxy

import (
	"fmt"
	"slices"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
)

// FetchResult implements fedpcav1.ProxyServiceServer: the job's user gets
// the result ciphertexts (under its own key) and the names of the noise
// parties in the release.
func (p *Proxy) FetchResult(req *fedpcav1.FetchResultRequest, stream fedpcav1.ProxyService_FetchResultServer) error {
	who := caller(stream.Context())
	j, err := p.job(req.GetJobId())
	if err != nil {
		return p.toStatus(err)
	}
	if who.String() != j.spec.User {
		return p.toStatus(fmt.Errorf("%w: only the job's user may fetch its result", ErrNotYours))
	}
	j.mu.Lock()
	owners, err := j.uploadedOwners()
	state, csps, active := j.rec.State, slices.Clone(j.rec.CSPs), slices.Clone(j.rec.Active)
	if len(j.rec.Parties) > 0 {
		active = slices.Clone(j.rec.Parties) // every party seals an output
	}
	reason := j.rec.Reason
	j.mu.Unlock()
	if err != nil {
		return p.toStatus(err)
	}
	if state != fedpcav1.JobState_JOB_STATE_DONE {
		return p.toStatus(fmt.Errorf("%w: job %s… is %s (%s)", ErrNotDone, j.id[:12], stateName(state), reason))
	}
	release, err := p.acquireLarge(stream.Context())
	if err != nil {
		return p.toStatus(err)
	}
	defer release()
	hd := &fedpcav1.ResultHeader{JobId: j.id, Ciphertexts: uint32(j.n), Owners: owners, CspMembers: csps}
	count := j.n
	if j.spec.Components() {
		// The members' sealed output shares, by point.
		hd.Ciphertexts, hd.Points, count = 0, active, len(active)
	}
	blobs, err := p.store.seq(j.id, "result", count)
	if err != nil {
		return p.toStatus(err)
	}
	if err := stream.Send(&fedpcav1.FetchResultResponse{Msg: &fedpcav1.FetchResultResponse_Header{Header: hd}}); err != nil {
		return err
	}
	for _, b := range blobs {
		msg := &fedpcav1.FetchResultResponse{Msg: &fedpcav1.FetchResultResponse_Ciphertext{Ciphertext: b}}
		if j.spec.Components() {
			msg = &fedpcav1.FetchResultResponse{Msg: &fedpcav1.FetchResultResponse_SealedOutput{SealedOutput: b}}
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	return nil
}
