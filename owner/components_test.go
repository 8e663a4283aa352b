package owner

import (
	"encoding/hex"
	"errors"
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
// without noise. A components job with noise needs neither. Of d = 6
// features it releases at most d/2 = 3 exact components unless its policy
// says more, and never more than d - 2 (the spec's own limit), declining
// with the limit and its value. A components job whose randomness the
// proxy deals is declined unless the policy allows it.
func TestExactComponentsPolicy(t *testing.T) {
	p, err := he.NewDefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := transport.NewCA("policy CA", time.Hour)
	var features []string
	for _, f := range []string{"a", "b", "c", "d", "e", "f"} {
		features = append(features, `{"name":"`+f+`","center":"0","scale":"1"}`)
	}
	o, sch := fuzzOwnerOf(t, ca, p, t.TempDir(), `{"id":"wdbc","features":[`+strings.Join(features, ",")+`],"label":"label","classes":["x","y"]}`)
	alice := transporttest.Credentials(t, ca, transport.Identity{Role: transport.RoleUser, ID: "alice"})
	rk, err := seal.NewExchangeKey()
	if err != nil {
		t.Fatal(err)
	}
	owners := ownerList(o, "hospital-a", "hospital-b")
	mk := func(components, noNoise bool, k int) ticketCase {
		s := &job.Spec{Version: job.Version, Dataset: "wdbc", SchemaHash: sch.HashHex(), Analysis: job.PCA, K: k,
			Epsilon: 1, Delta: 1e-6, NoisePlan: dp.PlanServers, Split: dp.DefaultSplit, MinOwners: 1,
			Deadline: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), MaxRows: 20_000, MaxOwnerRows: 10_000,
			HEParams: p.ID(), HEParamsHash: p.Fingerprint(), CommitteeN: 1, CommitteeThreshold: 1,
			CommitteeKey: strings.Repeat("c", 64), User: alice.Identity.String(), UserKey: strings.Repeat("d", 64), Nonce: "policy"}
		if components {
			// A committee of one: only the dealer's randomness (the
			// members' own needs three members).
			s.Release, s.ResultKey, s.Randomness = job.ReleaseComponents, hex.EncodeToString(rk.PublicKey().Bytes()), job.RandomnessDealer
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
		k                   int
		policy              Policy
		refused             string // "" to take part
		limit               job.PolicyLimit
		value               float64
	}{
		{"exact components, default policy", true, true, 1, Policy{}, "owner serve --allow-exact-components", job.LimitExactComponents, 0},
		{"exact components, no-noise tests allowed", true, true, 1, Policy{AllowNoNoise: true}, "owner serve --allow-exact-components", job.LimitExactComponents, 0},
		{"exact components, allowed", true, true, 3, Policy{AllowExactComponents: true}, "", 0, 0},
		{"exact components above half the features", true, true, 4, Policy{AllowExactComponents: true}, "above this owner's limit of 3", job.LimitExactMaxK, 3},
		{"exact components within a raised limit", true, true, 4, Policy{AllowExactComponents: true, ExactMaxK: 4}, "", 0, 0},
		{"exact components of d - 1, the limit raised further", true, true, 5, Policy{AllowExactComponents: true, ExactMaxK: 6}, "above this owner's limit of 4", job.LimitExactMaxK, 4},
		{"components with noise, default policy", true, false, 6, Policy{}, "", 0, 0},
		{"statistics without noise, exact components allowed", false, true, 1, Policy{AllowExactComponents: true}, "has no DP noise", job.LimitNoNoise, 0},
		{"statistics without noise, allowed", false, true, 1, Policy{AllowNoNoise: true}, "", 0, 0},
		{"components with noise, the dealer's randomness refused", true, false, 2, Policy{AllowExactComponents: true}, "owner serve --allow-dealer-components", job.LimitComponentsDealer, 0},
	} {
		tc := mk(c.components, c.noNoise, c.k)
		c.policy.Committee = o.cfg.Policy.Committee
		if !strings.Contains(c.what, "dealer") {
			c.policy.AllowDealer = true
		}
		o.cfg.Policy = c.policy
		s, _, _, r := o.checkTicket(tc.id, tc.ticket())
		switch {
		case c.refused == "" && r != nil:
			t.Errorf("%s: declined (%s: %s), want taken", c.what, r.code, r.detail)
		case c.refused == "" && s == nil:
			t.Errorf("%s: no spec and no refusal", c.what)
		case c.refused != "" && (r == nil || r.code != job.DeclinePolicy || !strings.Contains(r.detail, c.refused)):
			t.Errorf("%s: refusal %+v, want %s with %q", c.what, r, job.DeclinePolicy, c.refused)
		case c.refused != "" && (r.public.Limit != c.limit || r.public.LimitValue != c.value):
			t.Errorf("%s: the decline says %+v, want limit %s of %g", c.what, r.public, c.limit, c.value)
		}
	}
}

// TestExactJobsLedger: a source of rows takes part in at most its rule's
// exact components jobs per period (the reserved and committed ones); one
// that released nothing, or older than the period, does not count; the
// ledger records what each released; jobs with noise are not counted.
func TestExactJobsLedger(t *testing.T) {
	l, _ := openLedger(t, 10)
	l.exact = ExactRule{Jobs: 2, Period: time.Hour}
	const what = "exact pca components: top 3 of 6 features"
	for _, id := range []string{"j1", "j2"} {
		if st, err := l.Reserve("d", id, dp.Cost{}, 0, 0, what); err != nil || st != Reserved {
			t.Fatalf("%s: %s %v", id, st, err)
		}
	}
	if _, err := l.Reserve("d", "j3", dp.Cost{}, 0, 0, what); !errors.Is(err, ErrExactJobs) || !strings.Contains(err.Error(), "2 exact components jobs in the last 1h0m0s") {
		t.Fatalf("a third exact job: %v", err)
	}
	if _, err := l.Reserve("d", "noisy", dp.Cost{Rho: 0.01}, 1, 1e-6, ""); err != nil {
		t.Fatalf("a job with noise: %v", err)
	}
	if err := l.Release("d", "j1"); err != nil {
		t.Fatal(err)
	}
	if st, err := l.Reserve("d", "j3", dp.Cost{}, 0, 0, what); err != nil || st != Reserved {
		t.Fatalf("after one released nothing: %s %v", st, err)
	}
	entries, err := l.Entries("d")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.Release == what {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("%d entries record the release, want 3: %+v", n, entries)
	}
	l.exact.Period = time.Nanosecond // every earlier job is older than the period
	time.Sleep(time.Millisecond)
	if _, err := l.Reserve("d", "j4", dp.Cost{}, 0, 0, what); err != nil {
		t.Fatalf("a job after the period: %v", err)
	}
}
