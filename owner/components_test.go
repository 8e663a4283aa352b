package owner

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/seal"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/transport/transporttest"
)

// TestExactComponentsPolicy: an owner takes part in a components job
// without DP noise only with AllowExactComponents, and declines it
// otherwise with the public code policy; AllowNoNoise alone does not allow
// it, and AllowExactComponents alone does not allow a statistics job
// without noise. A components job with noise needs neither.
func TestExactComponentsPolicy(t *testing.T) {
	p, err := he.NewDefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := transport.NewCA("policy CA", time.Hour)
	o, sch := fuzzOwner(t, ca, p, t.TempDir())
	alice := transporttest.Credentials(t, ca, transport.Identity{Role: transport.RoleUser, ID: "alice"})
	rk, err := seal.NewExchangeKey()
	if err != nil {
		t.Fatal(err)
	}
	owners := ownerList(o, "hospital-a", "hospital-b")
	mk := func(components, noNoise bool) ticketCase {
		s := &job.Spec{Version: job.Version, Dataset: "wdbc", SchemaHash: sch.HashHex(), Analysis: job.PCA, K: 1,
			Epsilon: 1, Delta: 1e-6, NoisePlan: dp.PlanServers, Split: dp.DefaultSplit, MinOwners: 1,
			Deadline: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), MaxRows: 20_000, MaxOwnerRows: 10_000,
			HEParams: p.ID(), HEParamsHash: p.Fingerprint(), CommitteeN: 1, CommitteeThreshold: 1,
			CommitteeKey: strings.Repeat("c", 64), User: alice.Identity.String(), UserKey: strings.Repeat("d", 64), Nonce: "policy"}
		if components {
			s.Release, s.ResultKey = job.ReleaseComponents, hex.EncodeToString(rk.PublicKey().Bytes())
		}
		if noNoise {
			s.NoNoise, s.Epsilon, s.Delta, s.Split = true, 0, 0, dp.Split{}
		}
		if err := s.SetOwners(owners); err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		sig, _ := s.Sign(alice.Signer())
		return ticketCase{id: s.ID(), spec: s.Canonical(), sig: sig, cert: alice.Leaf.Raw, proof: proofOf(t, owners, 0)}
	}
	for _, c := range []struct {
		what                string
		components, noNoise bool
		policy              Policy
		refused             string // "" to take part
	}{
		{"exact components, default policy", true, true, Policy{}, "owner serve --allow-exact-components"},
		{"exact components, no-noise tests allowed", true, true, Policy{AllowNoNoise: true}, "owner serve --allow-exact-components"},
		{"exact components, allowed", true, true, Policy{AllowExactComponents: true}, ""},
		{"components with noise, default policy", true, false, Policy{}, ""},
		{"statistics without noise, exact components allowed", false, true, Policy{AllowExactComponents: true}, "has no DP noise"},
		{"statistics without noise, allowed", false, true, Policy{AllowNoNoise: true}, ""},
	} {
		tc := mk(c.components, c.noNoise)
		c.policy.Committee = o.cfg.Policy.Committee
		o.cfg.Policy = c.policy
		s, _, _, r := o.checkTicket(tc.id, tc.ticket())
		switch {
		case c.refused == "" && r != nil:
			t.Errorf("%s: declined (%s: %s), want taken", c.what, r.code, r.detail)
		case c.refused == "" && s == nil:
			t.Errorf("%s: no spec and no refusal", c.what)
		case c.refused != "" && (r == nil || r.code != job.DeclinePolicy || !strings.Contains(r.detail, c.refused)):
			t.Errorf("%s: refusal %+v, want %s with %q", c.what, r, job.DeclinePolicy, c.refused)
		}
	}
}
