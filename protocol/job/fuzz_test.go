package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/stats"
	"github.com/tuneinsight/lattigo/v5/ring"
)

// fuzzOwners are fuzzSpec's owners.
var fuzzOwners = keyed("hospital-a", "hospital-b", "hospital-c")

// fuzzSpec is a valid spec built from constants (no HE keys needed: the
// fingerprints are only hex strings to the decoder).
func fuzzSpec() *Spec {
	h := func(c string) string { return strings.Repeat(c, 64) }
	s := &Spec{
		Version: Version, Dataset: "wdbc", SchemaHash: h("a"), Analysis: DCA, K: 2,
		Epsilon: 1, Delta: 1e-6, NoisePlan: dp.PlanServers, Tolerate: 1, Split: dp.DefaultSplit,
		MinOwners: 2,
		Deadline:  time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), MaxRows: 30_000, MaxOwnerRows: 10_000,
		HEParams: "bgv-logn13-t60-q61x45x40", HEParamsHash: h("b"), CommitteeN: 3, CommitteeThreshold: 2,
		CommitteeKey: h("c"), User: "spiffe://fedpca/user/alice", UserKey: h("d"), Nonce: "0123456789abcdef",
	}
	if err := s.SetOwners(fuzzOwners); err != nil {
		panic(err)
	}
	return s
}

func FuzzParseSpec(f *testing.F) {
	good := fuzzSpec().Canonical()
	f.Add(good)
	noNoise := fuzzSpec()
	noNoise.NoNoise, noNoise.Epsilon = true, 0
	f.Add(noNoise.Canonical())
	f.Add(good[:len(good)/2])
	f.Add(bytes.Replace(good, []byte(`"version":2`), []byte(`"version":1`), 1))
	f.Add(bytes.Replace(good, []byte(`"num_owners":3`), []byte(`"num_owners":4`), 1))
	f.Add(bytes.Replace(good, []byte(`"owners_root":"`), []byte(`"owners_root":"0`), 1))
	f.Add(bytes.Replace(good, []byte(`"committee_threshold":2`), []byte(`"committee_threshold":4`), 1))
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSpec(b)
		if err != nil {
			if s != nil {
				t.Fatal("a spec returned with an error")
			}
			return
		}
		if !bytes.Equal(s.Canonical(), b) {
			t.Fatal("accepted a non-canonical spec")
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted an invalid spec: %v", err)
		}
		if !ValidJobID(s.ID()) {
			t.Fatalf("job ID %q", s.ID())
		}
		// What the daemons do next with an accepted spec must not panic.
		_ = s.CheckIncluded(fuzzOwners, OwnerIDs(fuzzOwners))
		_ = s.CheckMember(fuzzOwners[0], OwnerProof{})
		_ = s.Plan().Validate()
	})
}

// fuzzResults returns result documents made by the real code: a PCA, a DCA
// and a scatter result of a small release, as WriteOutputs writes them.
func fuzzResults(tb testing.TB) [][]byte {
	tb.Helper()
	l, err := stats.NewLayout(3, 2)
	if err != nil {
		tb.Fatal(err)
	}
	const bits = 8
	acc, err := stats.NewAccumulator(l, 1<<bits, bits)
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 40 {
		q := []int64{rng.Int64N(140) - 70, rng.Int64N(140) - 70, rng.Int64N(140) - 70}
		if err := acc.Add(q, i%2); err != nil {
			tb.Fatal(err)
		}
	}
	rel, err := stats.Unpack(l, bits, acc.Pack())
	if err != nil {
		tb.Fatal(err)
	}
	s := fuzzSpec()
	h := Header{JobID: s.ID(), Dataset: s.Dataset, SchemaHash: s.SchemaHash, HEParams: s.HEParams,
		Features: []string{"f1", "f2", "f3"}, Classes: []string{"benign", "malignant"}}
	pr := Privacy{Plan: dp.PlanServers, Tolerate: 1, Split: dp.DefaultSplit, Epsilon: 1, Delta: 1e-6, Rho: 0.01,
		Collusion: []dp.Collusion{{With: "nobody", Rho: 0.005, Epsilon: 0.7}}}
	var out [][]byte
	for _, name := range []string{PCA, DCA, Scatter} {
		res, err := AnalyzeRelease(h, name, 2, rel, []string{"hospital-a", "hospital-c"}, pr)
		if err != nil {
			tb.Fatal(err)
		}
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	// A components job's result (last).
	top := &Result{JobID: h.JobID, Dataset: h.Dataset, SchemaHash: h.SchemaHash, Analysis: PCA, Features: h.Features,
		Owners: []string{"hospital-a", "hospital-c"}, NumOwners: 2, NoisyN: 40, Privacy: pr, HEParams: h.HEParams, Released: ReleaseComponents,
		Output: &TopComponents{W: [][]float64{{1, 0}, {0, 0.6}, {0, 0.8}}, Eigenvalues: []float64{0.5, 0.25}}}
	top.Quality = componentsQuality(top, 3, 1)
	b, err := json.Marshal(top)
	if err != nil {
		tb.Fatal(err)
	}
	return append(out, b)
}

func FuzzParseResult(f *testing.F) {
	docs := fuzzResults(f)
	for _, b := range docs {
		f.Add(b)
	}
	pca := docs[0]
	f.Add(pca[:len(pca)-40])
	f.Add(bytes.Replace(pca, []byte(`"d": 3`), []byte(`"d": 4`), 1))
	f.Add(bytes.Replace(pca, []byte(`"k": 2`), []byte(`"k": 1`), 1))
	f.Add(bytes.Replace(pca, []byte(`"schema_hash": "aaaa`), []byte(`"schema_hash": "`), 1))
	f.Add(bytes.Replace(pca, []byte(`"analysis": "pca"`), []byte(`"analysis": "dca"`), 1))
	f.Add([]byte(`{"job_id":"x","release":{"d":1,"k":1,"bits":0,"r":[1],"v":[1],"n":[1]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := ParseResult(b)
		if err != nil {
			if res != nil {
				t.Fatal("a result returned with an error")
			}
			return
		}
		// Accepted: it re-encodes to a document that parses to the same
		// encoding, and what readers do with it does not panic.
		enc, err := json.Marshal(res)
		if err != nil {
			t.Fatalf("accepted result does not encode: %v", err)
		}
		again, err := ParseResult(enc)
		if err != nil {
			t.Fatalf("re-encoded result does not parse: %v", err)
		}
		enc2, _ := json.Marshal(again)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the document:\n%s\n%s", enc, enc2)
		}
		if res.Released == ReleaseComponents {
			if res.Release != nil || res.Components != nil || res.Output == nil {
				t.Fatal("a components result with statistics, or without its output")
			}
			d, k := res.Output.Dims()
			for j := range k {
				if len(res.Output.Vector(j)) != d {
					t.Fatal("components of uneven rows")
				}
			}
			if _, err := Reanalyze(res, PCA, 1); err == nil {
				t.Fatal("reanalysed a components result")
			}
			return
		}
		rel, err := res.Release.Release()
		if err != nil {
			t.Fatalf("validated release: %v", err)
		}
		if c := res.Components; c != nil {
			d, _ := c.Dims()
			_ = c.Project(make([]float64, d))
		}
		if rel.Layout.Len() <= 64 {
			_, _ = Reanalyze(res, PCA, 1)
		}
	})
}

// TestParseComponentsResult: a components job's result holds its output
// and nothing derived from the statistics; anything else is refused,
// naming the field.
func TestParseComponentsResult(t *testing.T) {
	docs := fuzzResults(t)
	top := docs[len(docs)-1]
	if _, err := ParseResult(top); err != nil {
		t.Fatalf("%v\n%s", err, top)
	}
	// DCA's and LDA's components results (generalised eigenvectors) parse too.
	for _, a := range []string{DCA, LDA} {
		if _, err := ParseResult(bytes.Replace(top, []byte(`"analysis":"pca"`), []byte(`"analysis":"`+a+`"`), 1)); err != nil {
			t.Errorf("a components result of %s: %v", a, err)
		}
	}
	for what, c := range map[string]struct{ from, to, msg string }{
		"scatter":             {`"analysis":"pca"`, `"analysis":"scatter"`, "analysis: scatter in a components result"},
		"classes":             {`"features"`, `"classes":["a","b"],"features"`, "classes"},
		"a release":           {`"he_params"`, `"release":{"d":1,"k":1,"bits":0,"r":[1],"v":[1],"n":[1]},"he_params"`, "release: present"},
		"a mean":              {`"he_params"`, `"mean":[0,0,0],"components":[[1],[0],[0]],"eigenvalues":[1],"all_eigenvalues":[1,0,0],"explained_variance_ratio":[1],"he_params"`, "mean"},
		"no output":           {`"output"`, `"other"`, "output: missing"},
		"too few rows":        {`[0,0.6],`, ``, "want 3 rows"},
		"an eigenvalue short": {`0.5,`, ``, "1 covariance eigenvalues for 2 components"},
		"a ragged row":        {`[0,0.6]`, `[0]`, "row 1 has 1 entries"},
	} {
		b := bytes.Replace(top, []byte(c.from), []byte(c.to), 1)
		if bytes.Equal(b, top) {
			t.Fatalf("%s: %q not in the document", what, c.from)
		}
		if _, err := ParseResult(b); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want an error containing %q", what, err, c.msg)
		}
	}
	// Quality figures belong to a result with noise only.
	var exact Result
	if err := json.Unmarshal(top, &exact); err != nil {
		t.Fatal(err)
	}
	if exact.Quality == nil {
		t.Fatal("a components result with noise has no quality")
	}
	exact.Privacy.NoNoise = true
	b, _ := json.Marshal(&exact)
	if _, err := ParseResult(b); err == nil || !strings.Contains(err.Error(), "quality: present in an exact components result") {
		t.Errorf("quality in an exact components result: %v", err)
	}
}

// TestParseResult: the documents the real code writes parse, and broken ones
// are refused naming the field.
func TestParseResult(t *testing.T) {
	docs := fuzzResults(t)
	for _, b := range docs {
		if _, err := ParseResult(b); err != nil {
			t.Fatalf("%v\n%s", err, b)
		}
	}
	pca := docs[0]
	for what, c := range map[string]struct{ from, to, msg string }{
		"short schema hash":     {`"schema_hash": "aaaa`, `"schema_hash": "`, "schema_hash"},
		"release of another d":  {`"d": 3`, `"d": 4`, "release: block lengths"},
		"components of another": {`"analysis": "pca"`, `"analysis": "dca"`, "components"},
		"trailing data":         {"\n}", "\n} {}", "invalid character"},
		"owner count":           {`"num_owners": 2`, `"num_owners": 3`, "num_owners"},
		"repeated owner":        {`"hospital-c"`, `"hospital-a"`, "owners"},
		"output in statistics":  {`"he_params"`, `"output": {"components": [[1]], "covariance_eigenvalues": [1]}, "he_params"`, "output: present"},
		"unknown released":      {`"he_params"`, `"released": "everything", "he_params"`, "released"},
		"components with stats": {`"he_params"`, `"released": "components", "he_params"`, "release: present in a components result"},
	} {
		b := bytes.Replace(pca, []byte(c.from), []byte(c.to), 1)
		if bytes.Equal(b, pca) {
			t.Fatalf("%s: %q not in the document", what, c.from)
		}
		if _, err := ParseResult(b); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want an error containing %q", what, err, c.msg)
		}
	}
}

func FuzzCheckNoiseParties(f *testing.F) {
	s := fuzzSpec()
	list := strings.Join(OwnerIDs(fuzzOwners), ",")
	f.Add(list, "hospital-a,hospital-b", "csp-1,csp-2")
	f.Add(list, "hospital-a,hospital-b,hospital-c", "csp-1,csp-3")
	f.Add(list, "hospital-a", "csp-1,csp-2")
	f.Add(list, "hospital-a,hospital-a", "csp-1,csp-2")
	f.Add(list, "hospital-a,hospital-z", "csp-1,csp-2")
	f.Add(list, "hospital-a,hospital-b", "csp-1,csp-1")
	f.Add(list, "hospital-a,hospital-b", "csp-1,")
	f.Add(list+",hospital-z", "hospital-a,hospital-z", "csp-1,csp-2")
	f.Add("hospital-a,hospital-b,hospital-z", "hospital-a,hospital-z", "csp-1,csp-2")
	f.Fuzz(func(t *testing.T, owners, included, csps string) {
		all, os, cs := keyed(strings.Split(owners, ",")...), strings.Split(included, ","), strings.Split(csps, ",")
		err := s.CheckNoiseParties(all, os, cs)
		if err != nil {
			return
		}
		if len(os) < s.MinOwners || len(cs) != s.CommitteeThreshold {
			t.Fatalf("accepted %d owners and %d members", len(os), len(cs))
		}
		sorted := slices.Sorted(slices.Values(os))
		if len(slices.Compact(sorted)) != len(os) {
			t.Fatal("accepted a repeated owner")
		}
		if !slices.Equal(all, fuzzOwners) {
			t.Fatalf("accepted the owner list %q, the spec commits to %q", all, fuzzOwners)
		}
		for _, o := range os {
			if !slices.Contains(OwnerIDs(fuzzOwners), o) {
				t.Fatalf("accepted owner %q", o)
			}
		}
		// The accounting the user computes from them must work.
		if _, err := s.Plan().Shares(os, cs); err != nil {
			t.Fatalf("shares of accepted parties: %v", err)
		}
	})
}

// FuzzDecline: a decline code as the proxy receives it from an owner (a
// wire enum: any int32). Only the codes of the closed list are accepted, and
// each round-trips through its name; nothing else is, so no free text or
// number from an owner can be stored or shown.
func FuzzDecline(f *testing.F) {
	for _, v := range []int32{0, 1, 2, 7, 8, 9, -1, 1 << 30} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v int32) {
		d, err := ParseDecline(v)
		known := slices.Contains(Declines(), Decline(v))
		if (err == nil) != known {
			t.Fatalf("ParseDecline(%d): %v, known %v", v, err, known)
		}
		if err != nil {
			return
		}
		back, err := ParseDeclineName(d.String())
		if err != nil || back != d || d.Text() == "" || d.Text() == "unknown reason" {
			t.Fatalf("code %d: name %q -> %v %v, text %q", v, d.String(), back, err, d.Text())
		}
	})
}

// FuzzDeclineDetail: any detail an owner may send with a decline (the wire
// fields of fedpca.v1.DeclineDetail) for any code and schema size. An
// accepted one fits its code (a known limit with policy, valued exactly
// when the limit has a value; a known schema field with schema_mismatch,
// of a feature of the schema exactly when the field is a feature's), goes
// back to the same wire fields, and is said in a bounded text that never
// repeats a field it does not know.
func FuzzDeclineDetail(f *testing.F) {
	f.Add(int32(1), 1.0, "", int32(0), false, int32(DeclinePolicy), 10)
	f.Add(int32(3), 0.0, "", int32(0), false, int32(DeclinePolicy), 10)
	f.Add(int32(0), 0.0, "min", int32(3), true, int32(DeclineSchemaMismatch), 10)
	f.Add(int32(0), 0.0, "trim", int32(0), false, int32(DeclineSchemaMismatch), 10)
	f.Add(int32(0), 0.0, "min", int32(10), true, int32(DeclineSchemaMismatch), 10)
	f.Add(int32(2), -1.0, "name", int32(-5), true, int32(DeclineBudget), 0)
	f.Fuzz(func(t *testing.T, limit int32, value float64, field string, feature int32, has bool, code int32, d int) {
		c := Decline(code)
		det := DetailOf(limit, value, field, feature, has)
		if err := det.Validate(c, d); err != nil {
			return
		}
		text := c.Explain(det, nil)
		if len(text) > 400 || (field != "" && !strings.Contains(text, field) && field != "id") {
			t.Fatalf("%+v (%s): text %q", det, c, text)
		}
		switch {
		case det.IsZero():
		case det.Limit != 0:
			if c != DeclinePolicy || det.Field != "" || !(limits[det.Limit].valued == (det.LimitValue > 0)) {
				t.Fatalf("accepted %+v with %s", det, c)
			}
		default:
			if c != DeclineSchemaMismatch || !slices.Contains(schema.ReadingFields, det.Field) || det.Feature >= d || det.Feature < -1 {
				t.Fatalf("accepted %+v with %s, %d features", det, c, d)
			}
		}
		l, v, fl, ft := det.Wire()
		var ftv int32
		if ft != nil {
			ftv = *ft
		}
		if back := DetailOf(l, v, fl, ftv, ft != nil); back != det {
			t.Fatalf("%+v goes back as %+v", det, back)
		}
	})
}

// FuzzReadStatistics: an owner's rows as they come (any bytes). Reading
// never depends on the rows for its outcome: whatever the rows hold, it
// fails only when the header does not fit the schema (line 1), and
// otherwise every record is used, skipped or dropped; at most
// max_owner_rows are used, and rows are dropped only once that many are.
func FuzzReadStatistics(f *testing.F) {
	sch, err := schema.Parse([]byte(`{"id":"t","features":[{"name":"a","center":"1","scale":"2"},{"name":"b","center":"0","scale":"0.5"}],"label":"y","classes":["p","q"]}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("a,b,y\n1,2,p\n3,4,q\n"), int64(5))
	f.Add([]byte("a,b,y\n1,x,p\n3,4,SENTINEL\n5,6,q\n7,8\n\"9,1,p\n"), int64(2))
	f.Add([]byte("b,y,a\n1,p,2\n"), int64(1))
	f.Add([]byte("a,y\n1,p\n"), int64(1))
	f.Add([]byte(""), int64(1))
	f.Fuzz(func(t *testing.T, data []byte, cap int64) {
		if cap < 1 || cap > 1000 {
			return
		}
		s := &Spec{Analysis: DCA, MaxOwnerRows: cap, MaxRows: cap}
		acc, rep, err := ReadStatistics(s, sch, bytes.NewReader(data))
		if err != nil {
			var re *schema.RowError
			if !errors.As(err, &re) || re.Line != 1 {
				t.Fatalf("reading failed past the header: %v", err)
			}
			return
		}
		if rep.Rows != acc.Rows() || rep.Rows > cap || rep.Rows < 0 || rep.Skipped < 0 || rep.Dropped < 0 || len(rep.Examples) > 5 {
			t.Fatalf("report %+v with %d rows in the statistics, cap %d", rep, acc.Rows(), cap)
		}
		if rep.Dropped > 0 && rep.Rows != cap {
			t.Fatalf("dropped %d rows with only %d of %d used", rep.Dropped, rep.Rows, cap)
		}
	})
}

// FuzzProfileRounds reads arbitrary CSV through a bounded schema for the
// profile's two rounds: reading never fails past the header, every moments
// row stays in the box (sums of squares within rows 2^2g, sums within rows
// 2^g), also when clamped into it under a map that sends the bounds beyond;
// the per-feature histograms over any window count every row used once per
// feature, and the norms histogram exactly once.
func FuzzProfileRounds(f *testing.F) {
	sch, err := schema.Parse([]byte(`{"id":"t","features":[{"name":"a","center":"5","scale":"5","min":"0","max":"10"},{"name":"b","center":"-1","scale":"2","min":"-3","max":"1"}],"clip_norm":"1.5","quant_bits":8}`))
	if err != nil {
		f.Fatal(err)
	}
	narrow, err := schema.Parse([]byte(`{"id":"t","features":[{"name":"a","center":"4","scale":"2","min":"0","max":"10"},{"name":"b","center":"-1","scale":"1","min":"-3","max":"1"}],"clip_norm":"1.5","quant_bits":8}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("a,b\n1,2\n30,-4\n-7,0.5\n"), int64(5), "0.5", "1.2")
	f.Add([]byte("a,b\n1,2\n30,-4\n-7,0.5\n"), int64(5), "-0.5", "0.25")
	f.Add([]byte("b,a\n1e3,x\n\n5,5\n"), int64(1), "0.001", "100")
	f.Add([]byte(""), int64(1), "1", "2")
	f.Fuzz(func(t *testing.T, data []byte, cap int64, e1, e2 string) {
		if cap < 1 || cap > 1000 {
			return
		}
		d1, err1 := fixedpoint.ParseDecimal(e1)
		d2, err2 := fixedpoint.ParseDecimal(e2)
		norms := &Spec{Analysis: NormsJob, MaxOwnerRows: cap, MaxRows: cap, NormEdges: []fixedpoint.Decimal{d1, d2}}
		moments := &Spec{Analysis: MomentsJob, MaxOwnerRows: cap, MaxRows: cap}
		acc, rep, err := ReadStatistics(moments, sch, bytes.NewReader(data))
		if err != nil {
			var re *schema.RowError
			if !errors.As(err, &re) || re.Line != 1 {
				t.Fatalf("moments: reading failed past the header: %v", err)
			}
			return
		}
		one := int64(1) << sch.Bits
		pack := acc.Pack()
		for i := range 2 {
			if pack[i] < 0 || pack[i] > rep.Rows*one*one || pack[2+i] > rep.Rows*one || pack[2+i] < -rep.Rows*one {
				t.Fatalf("moments %v for %d rows: outside the box", pack, rep.Rows)
			}
		}
		// The moments clamped into the box, under a map that sends the
		// bounds beyond it, stay in the box too.
		acc, rep, err = ReadStatistics(&Spec{Analysis: MomentsJob, MaxOwnerRows: cap, MaxRows: cap, ClampBox: true}, narrow, bytes.NewReader(data))
		if err != nil {
			t.Fatalf("clamped moments: %v", err)
		}
		pack = acc.Pack()
		for i := range 2 {
			if pack[i] < 0 || pack[i] > rep.Rows*one*one || pack[2+i] > rep.Rows*one || pack[2+i] < -rep.Rows*one {
				t.Fatalf("clamped moments %v for %d rows: outside the box", pack, rep.Rows)
			}
		}
		if err1 != nil || err2 != nil || d1.Rat().Cmp(d2.Rat()) >= 0 {
			return
		}
		// The marginals over the window [e1, e2] count every row used once
		// per feature.
		marginals := &Spec{Analysis: MarginalsJob, MaxOwnerRows: cap, MaxRows: cap, Buckets: 3, Windows: []Window{{Lo: d1, Hi: d2}, {Lo: d1, Hi: d2}}}
		acc, rep, err = ReadStatistics(marginals, sch, bytes.NewReader(data))
		if err != nil {
			t.Fatalf("marginals: %v", err)
		}
		pack = acc.Pack()
		for i := range 2 {
			var total int64
			for _, c := range pack[3*i : 3*i+3] {
				if c < 0 {
					t.Fatalf("negative count %d", c)
				}
				total += c
			}
			if total != rep.Rows*one {
				t.Fatalf("feature %d's histogram holds %d rows at scale 2^g, %d were read", i, total/one, rep.Rows)
			}
		}
		if d1.Sign() <= 0 {
			return // Spec.Validate refuses edges that are not positive and increasing
		}
		acc, rep, err = ReadStatistics(norms, sch, bytes.NewReader(data))
		if err != nil {
			t.Fatalf("norms: %v", err)
		}
		var total int64
		for _, c := range acc.Pack() {
			if c < 0 {
				t.Fatalf("negative count %d", c)
			}
			total += c
		}
		if total != rep.Rows*one {
			t.Fatalf("histogram holds %d rows at scale 2^g, %d were read", total/one, rep.Rows)
		}
	})
}

// FuzzUploadPart: what a member receives of each upload ciphertext (the
// digest of c0, c1, the proof), and what the proxy receives of its proof,
// for an upload of one ciphertext and for the last of a proof group of two
// (whose first part is the owner's). VerifyParts accepts only the owner's
// own parts for its job, owner and group: any other digest, c1 or proof is
// refused, whatever its bytes.
func FuzzUploadPart(f *testing.F) {
	p, err := he.NewDefaultParams()
	if err != nil {
		f.Fatal(err)
	}
	kp := he.GenerateKeyPair(p)
	key, err := p.ProofKey(kp.Public)
	if err != nil {
		f.Fatal(err)
	}
	enc, _ := he.NewEncryptor(p, kp.Public)
	const jobID, owner = "job", "hospital-a"
	type upload struct {
		parts []Part // the owner's
		c0    [32]byte
		c1    []byte
		proof []byte
	}
	var ups [2]upload // by group: one ciphertext, two
	for g := range ups {
		cts, wits, err := enc.EncryptWitnessed(make([]int64, (g+1)*p.N()))
		if err != nil || len(cts) != g+1 {
			f.Fatal(err, len(cts))
		}
		proofs, _, err := ProveUpload(p, key, jobID, owner, cts, wits, nil)
		if err != nil {
			f.Fatal(err)
		}
		for i, ct := range cts {
			ups[g].parts = append(ups[g].parts, Part{C0Digest: C0Digest(p, ct), C1: p.AppendPoly(nil, ct.Value[1]), Proof: proofs[i]})
		}
		last := ups[g].parts[g]
		ups[g].c0, ups[g].c1, ups[g].proof = last.C0Digest, last.C1, last.Proof
		f.Add(last.C0Digest[:], last.C1, last.Proof, g == 1)
		f.Add(last.C0Digest[:], last.C1, last.Proof[:1000], g == 1)
		f.Add(make([]byte, 32), last.C1, last.Proof, g == 1)
		f.Add(last.C0Digest[:], last.C1[:8], last.Proof, g == 1)
	}
	rq := p.RingQ().AtLevel(p.Level())
	out := []ring.Poly{rq.NewPoly(), rq.NewPoly()}
	f.Fuzz(func(t *testing.T, d, c, pr []byte, pair bool) {
		if len(d) != 32 {
			return // the member refuses other lengths before VerifyParts
		}
		up := ups[0]
		if pair {
			up = ups[1]
		}
		part := Part{C1: c, Proof: pr}
		copy(part.C0Digest[:], d)
		parts := append(append([]Part(nil), up.parts[:len(up.parts)-1]...), part)
		err := VerifyParts(p, key, jobID, owner, 0, len(parts), parts, out[:len(parts)])
		valid := bytes.Equal(d, up.c0[:]) && bytes.Equal(c, up.c1) && bytes.Equal(pr, up.proof)
		if (err == nil) != valid {
			t.Fatalf("VerifyParts: %v for a part that is valid: %v", err, valid)
		}
	})
}

// FuzzRoundWire: the decoders of a power job's round on the wire: a round
// spec parses only in canonical form, into a round whose encoding is the
// input; a public matrix's frames (cut from the input at the given sizes)
// give a matrix of the job's shape or an error, never more entries.
func FuzzRoundWire(f *testing.F) {
	sch, err := schema.Infer(strings.NewReader("a,b,c,d\n1,2,3,4\n2,3,1,0\n"), "ds", "")
	if err != nil {
		f.Fatal(err)
	}
	parent := fuzzSpec()
	parent.Analysis, parent.K, parent.SchemaHash, parent.Dataset = PCA, 1, sch.HashHex(), sch.ID
	parent.Power = &PowerSpec{Oversample: 1, Rounds: 2, Seed: "fuzz", QBits: 8, RoundSeconds: 60}
	rs := RoundSpec{Parent: parent.ID(), Round: 1, QHash: strings.Repeat("ab", 32)}
	q := make([]byte, 8*8)
	f.Add(rs.Canonical(), q, uint8(64))
	f.Add(rs.Canonical(), q[:40], uint8(8))
	f.Add([]byte(`{"parent":"x","round":1,"q_hash":"y"}`), append(q, 1, 2, 3), uint8(3))
	f.Fuzz(func(t *testing.T, spec, words []byte, frame uint8) {
		if r, err := ParseRoundSpec(spec); err == nil {
			if !bytes.Equal(r.Canonical(), spec) || r.Round < 1 || !ValidJobID(r.ID()) {
				t.Fatalf("round spec %q parsed as %+v", spec, r)
			}
		}
		size := max(int(frame), 1)
		next := words
		m, err := ReadMatrix(parent, sch, func() ([]byte, error) {
			if len(next) == 0 {
				return nil, io.EOF
			}
			n := min(size, len(next))
			b := next[:n]
			next = next[n:]
			return b, nil
		})
		if err == nil && (len(words) != 8*8 || m.D != 4 || m.P != 2 || len(m.Data) != 8) {
			t.Fatalf("%d bytes gave a %d x %d matrix of %d entries", len(words), m.D, m.P, len(m.Data))
		}
	})
}
