package user

import (
	"context"
	"encoding/hex"
	"fmt"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
)

// Jobs lists the jobs this user created (ended ones too with all), oldest
// first, as brief statuses.
func (c *Client) Jobs(ctx context.Context, all bool) ([]*fedpcav1.JobStatus, error) {
	var resp *fedpcav1.ListJobsResponse
	err := c.call(ctx, "list jobs on the proxy", callTimeout, func(ctx context.Context) (err error) {
		resp, err = c.proxy.ListJobs(ctx, &fedpcav1.ListJobsRequest{IncludeEnded: all, Brief: true})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]*fedpcav1.JobStatus, 0, len(resp.GetJobs()))
	for _, j := range resp.GetJobs() {
		out = append(out, j.GetStatus())
	}
	return out, nil
}

// Resolve returns the ID of this user's one job whose ID starts with
// prefix (job.MatchID: a unique prefix of at least 4 hex digits).
func (c *Client) Resolve(ctx context.Context, prefix string) (string, error) {
	jobs, err := c.Jobs(ctx, true)
	if err != nil {
		return "", err
	}
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.GetJobId()
	}
	id, err := job.MatchID(ids, prefix)
	if err != nil {
		return "", fmt.Errorf("%w among this user's %d jobs", err, len(ids))
	}
	return id, nil
}

// Job returns a job's full status (owner lists) with its ticket: the
// signed spec and the schema.
func (c *Client) Job(ctx context.Context, id string) (*fedpcav1.JobInfo, error) {
	var resp *fedpcav1.GetJobResponse
	err := c.call(ctx, "get job "+short(id), callTimeout, func(ctx context.Context) (err error) {
		resp, err = c.proxy.GetJob(ctx, &fedpcav1.GetJobRequest{JobId: id})
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp.GetJob(), nil
}

// Ticket returns a job's spec and schema as the proxy holds them, checked:
// the spec's ID is the job's, the schema is the spec's, and the spec is for
// this user's HE key (so that Fetch can decrypt the result), and a
// components job's for its result key.
func (c *Client) Ticket(ctx context.Context, id string) (*job.Spec, *schema.Schema, error) {
	info, err := c.Job(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	spec, err := job.ParseSpec(info.GetSpec())
	if err != nil {
		return nil, nil, fmt.Errorf("job %s: spec from the proxy: %w", short(id), err)
	}
	if spec.ID() != id {
		return nil, nil, fmt.Errorf("job %s: the proxy sent the spec of job %s", short(id), short(spec.ID()))
	}
	sch, err := schema.Parse(info.GetSchema())
	if err != nil {
		return nil, nil, fmt.Errorf("job %s: schema from the proxy: %w", short(id), err)
	}
	if sch.HashHex() != spec.SchemaHash {
		return nil, nil, fmt.Errorf("job %s: the proxy sent another schema than the spec's", short(id))
	}
	if c.cfg.Keys.Public == nil {
		return nil, nil, ErrNoKeys
	}
	if fp := job.Fingerprint(c.params.Codecs().PublicKey.Marshal(c.cfg.Keys.Public)); fp != spec.UserKey {
		return nil, nil, fmt.Errorf("job %s is for the HE key %s…, not this key directory's %s…: use the --keys it was created with", short(id), spec.UserKey[:min(12, len(spec.UserKey))], fp[:12])
	}
	if spec.Components() {
		if c.cfg.ResultKey == nil {
			return nil, nil, ErrNoResultKey
		}
		if pub := hex.EncodeToString(c.cfg.ResultKey.PublicKey().Bytes()); pub != spec.ResultKey {
			return nil, nil, fmt.Errorf("job %s's output is sealed to the result key %s…, not this key directory's %s…: use the --keys it was created with", short(id), spec.ResultKey[:min(12, len(spec.ResultKey))], pub[:12])
		}
	}
	return spec, sch, nil
}

// Cancel ends an open job of this user's without a release; every owner
// returns its reservation (see the proxy's CancelJob).
func (c *Client) Cancel(ctx context.Context, id string) (*fedpcav1.JobStatus, error) {
	var resp *fedpcav1.CancelJobResponse
	err := c.call(ctx, "cancel job "+short(id), callTimeout, func(ctx context.Context) (err error) {
		resp, err = c.proxy.CancelJob(ctx, &fedpcav1.CancelJobRequest{JobId: id})
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp.GetJob(), nil
}

// Awaited returns the owners of a sealed or ended job's full status that
// have neither uploaded nor declined, in the spec's order. An open job's
// status lists no answers (only counts at the proxy's progress ticks: who
// uploaded when would tell how many rows each has): nil for it.
func Awaited(st *fedpcav1.JobStatus) []string {
	if st.GetState() == fedpcav1.JobState_JOB_STATE_OPEN {
		return nil
	}
	answered := map[string]bool{}
	for _, o := range st.GetUploadedOwners() {
		answered[o] = true
	}
	for _, d := range st.GetDeclinedOwners() {
		answered[d.GetOwner()] = true
	}
	var out []string
	for _, o := range st.GetExpectedOwnerRefs() {
		if !answered[o.GetId()] {
			out = append(out, o.GetId())
		}
	}
	return out
}
