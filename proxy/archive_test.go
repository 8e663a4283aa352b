package proxy

import (
	"crypto/sha256"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/proto"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/transport"
)

// answersJob returns a job of n owners stored in a test store, where the
// first owner uploaded and the second declined, and a proxy over that store.
func answersJob(tb testing.TB, n int) (*Proxy, *jobState, []string) {
	tb.Helper()
	j, owners := ticketJob(tb, n, 3)
	st := storeWith(tb, j)
	p := &Proxy{hub: newWatchHub(1, "test"), store: st, log: hclog.NewNullLogger(), jobs: map[string]*jobState{j.id: j}}
	at := time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)
	digest := sha256.Sum256([]byte(j.id))
	u := uploadRecord{Owner: owners[0], Digest: fmt.Sprintf("%x", digest), At: at}
	d := declineRecord{Owner: owners[1], Reason: job.DeclinePolicy, At: at}
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := p.commit(j, func(prog *jobProgress) { prog.Uploaded++ }, func(prog *jobProgress) error {
		return st.addUpload(j.id, prog, u, [][]byte{[]byte("sum")}, [][]byte{digest[:]}, nil)
	}); err != nil {
		tb.Fatal(err)
	}
	j.uploads[u.Owner] = u
	if err := p.commit(j, func(prog *jobProgress) { prog.Declined++ }, func(prog *jobProgress) error {
		return st.addDecline(j.id, prog, d, nil)
	}); err != nil {
		tb.Fatal(err)
	}
	j.declines[d.Owner] = d
	return p, j, owners
}

// ownerAnswers is everything the proxy answers about a job's owners: the
// user's full status and each owner's status and ticket (msgs), the status
// page's owner list and the result's owner list.
type ownerAnswers struct {
	msgs     []proto.Message
	page     []OwnerStatus
	uploaded []string
}

// answersOf returns a job's ownerAnswers, and checks that a stranger is not
// named.
func answersOf(t *testing.T, j *jobState, owners []string) ownerAnswers {
	t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []proto.Message
	user := transport.Identity{Role: transport.RoleUser, ID: "alice"}
	// The lists as a sealed job shows them (an open one shows none:
	// progress.go).
	state := j.rec.State
	if state == fedpcav1.JobState_JOB_STATE_OPEN {
		j.rec.State = fedpcav1.JobState_JOB_STATE_SWITCHING
	}
	st, err := j.status(true, user)
	j.rec.State = state
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, st)
	for _, o := range owners {
		who := transport.Identity{Role: transport.RoleOwner, ID: o}
		if _, named, err := j.named(o); err != nil || !named {
			t.Fatalf("owner %s: named %v, %v", o, named, err)
		}
		info, err := j.info(who)
		if err != nil {
			t.Fatal(err)
		}
		r, err := j.ticketResponse(o)
		if err != nil {
			t.Fatal(err)
		}
		pr := r.GetOwnerProof()
		if err := j.spec.CheckMember(keyedOwners([]string{o})[0], job.OwnerProof{Index: int(pr.GetIndex()), Path: pr.GetPath()}); err != nil {
			t.Fatalf("owner %s's proof: %v", o, err)
		}
		out = append(out, info, pr)
	}
	if _, named, err := j.named("owner-99999"); err != nil || named {
		t.Fatalf("a stranger: named %v, %v", named, err)
	}
	if err := j.party(transport.Peer{Identity: transport.Identity{Role: transport.RoleOwner, ID: "owner-99999"}}); err == nil {
		t.Fatal("a stranger is a party")
	}
	// An owner's name with another key (a certificate whoever holds a CA
	// could issue) is not that owner.
	forged := transport.Peer{Identity: transport.Identity{Role: transport.RoleOwner, ID: owners[0]}, Key: job.Fingerprint([]byte("a forged key"))}
	if err := j.party(forged); err == nil || !strings.Contains(err.Error(), "presents key "+forged.Key) || !strings.Contains(err.Error(), "by key "+keyedOwners(owners[:1])[0].Key) {
		t.Fatalf("an owner's name with another key: %v", err)
	}
	if err := j.party(transport.Peer{Identity: forged.Identity, Key: keyedOwners(owners[:1])[0].Key}); err != nil {
		t.Fatalf("the owner with its key: %v", err)
	}
	list, answered, err := j.answered()
	if err != nil {
		t.Fatal(err)
	}
	rec := j.rec
	rec.State = fedpcav1.JobState_JOB_STATE_OPEN // the page says "missing" rather than "waiting" once a job has ended
	page := jobStatus(j, &rec, list, answered, j.rec.Created, true)
	ups, err := j.uploadedOwners()
	if err != nil {
		t.Fatal(err)
	}
	return ownerAnswers{msgs: out, page: page.Owners, uploaded: ups}
}

// TestArchivedJob: once a job has ended, its owner list and answers leave
// memory, and everything the proxy answers about its owners is the same as
// before, read from the store; after a restart too, and for a job that ended
// before a crash (or under an older proxy) without being archived.
func TestArchivedJob(t *testing.T) {
	p, j, owners := answersJob(t, 5)
	before := answersOf(t, j, owners)

	j.mu.Lock()
	if err := p.commit(j, func(prog *jobProgress) { prog.State = fedpcav1.JobState_JOB_STATE_FAILED }, func(prog *jobProgress) error {
		return p.store.fail(j.id, prog)
	}); err != nil {
		t.Fatal(err)
	}
	if !j.archived() || j.uploads != nil || j.declines != nil || j.rec.Owners != nil {
		t.Fatalf("an ended job keeps its owners in memory: archived %v, %d uploads, %d declines, %d owners", j.archived(), len(j.uploads), len(j.declines), len(j.rec.Owners))
	}
	j.mu.Unlock()
	same := func(what string, got ownerAnswers) {
		t.Helper()
		sameOwner := func(a, b OwnerStatus) bool {
			return a.ID == b.ID && a.State == b.State && a.Reason == b.Reason && a.ReasonText == b.ReasonText && a.At.Equal(b.At)
		}
		if !slices.EqualFunc(before.page, got.page, sameOwner) || !slices.Equal(before.uploaded, got.uploaded) {
			t.Fatalf("%s: the status page's owners %+v, the result's %v; before %+v, %v", what, got.page, got.uploaded, before.page, before.uploaded)
		}
		for i := range before.msgs {
			// The state changed; the rest must not.
			a, b := proto.Clone(before.msgs[i]), proto.Clone(got.msgs[i])
			for _, m := range []proto.Message{a, b} {
				switch m := m.(type) {
				case *fedpcav1.JobStatus:
					m.State, m.Reason, m.UpdatedUnix = 0, "", 0
				case *fedpcav1.JobInfo:
					m.Status.State, m.Status.Reason, m.Status.UpdatedUnix = 0, "", 0
				}
			}
			if !proto.Equal(a, b) {
				t.Fatalf("%s: answer %d differs:\n%v\n%v", what, i, a, b)
			}
		}
	}
	same("archived", answersOf(t, j, owners))
	// The status lists an ended job's owners only when asked for by ID.
	if st := p.overview(true, ""); len(st.Jobs) != 1 || st.Jobs[0].Owners != nil || st.Jobs[0].OwnersUploaded != 1 {
		t.Fatalf("the overview of an ended job: %+v", st.Jobs)
	}
	if st := p.overview(true, j.id); len(st.Jobs) != 1 || len(st.Jobs[0].Owners) != len(owners) {
		t.Fatalf("an ended job's status asked for by ID: %+v", st.Jobs)
	}
	j.mu.Lock()
	if done, _, err := p.checkIncludedLocked(j, owners[0], []byte("another digest")); !done || err == nil {
		t.Fatalf("another upload of an archived job's uploader: %v, %v", done, err)
	}
	j.mu.Unlock()

	// A restart loads the archived job without its answers.
	sjs, err := p.store.jobs()
	if err != nil || len(sjs) != 1 || !sjs[0].archived || sjs[0].uploads != nil {
		t.Fatalf("stored jobs: %d, %v", len(sjs), err)
	}
	loaded, err := decodeJob(sjs[0], func(int) int { return 1 }, p.store)
	if err != nil || !loaded.archived() {
		t.Fatalf("loaded: %v", err)
	}
	same("loaded", answersOf(t, loaded, owners))

	// A job stored ended but not archived (a crash between its end and its
	// archiving) is loaded whole, then archived.
	p2, j2, owners2 := answersJob(t, 4)
	before = answersOf(t, j2, owners2)
	j2.rec.State = fedpcav1.JobState_JOB_STATE_DONE
	if err := p2.store.setProgress(j2.id, &j2.rec.jobProgress); err != nil {
		t.Fatal(err)
	}
	sjs, err = p2.store.jobs()
	if err != nil || len(sjs) != 1 || sjs[0].archived {
		t.Fatalf("stored jobs: %d, %v", len(sjs), err)
	}
	loaded, err = decodeJob(sjs[0], func(int) int { return 1 }, p2.store)
	if err != nil || loaded.archived() {
		t.Fatalf("loaded: %v", err)
	}
	p2.archive(loaded)
	if !loaded.archived() {
		t.Fatal("not archived at load")
	}
	same("archived at load", answersOf(t, loaded, owners2))
}

// TestArchivedJobMemory: what an ended job keeps in memory does not grow
// with its owners: a job of 10,000 owners that all answered, its heap (what
// the collector frees once the proxy forgets the job) while it runs and once
// archived.
func TestArchivedJobMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 10,000-owner job")
	}
	heap := func() int64 {
		runtime.GC()
		runtime.GC() // and what sync.Pools held until the first
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	// held is the heap the job holds: the difference made by forgetting it.
	held := func(p *Proxy, j **jobState) int64 {
		with := heap()
		delete(p.jobs, (*j).id)
		*j = nil
		return with - heap()
	}
	// A job of 10,000 owners, all of whom uploaded but one who declined.
	job := func() (*Proxy, *jobState) {
		p, j, owners := answersJob(t, 10_000)
		j.mu.Lock()
		defer j.mu.Unlock()
		err := p.commit(j, func(prog *jobProgress) { prog.Uploaded = len(owners) - 1 }, func(prog *jobProgress) error {
			return p.store.addUploads(j.id, prog, func(tx uploadTx) error {
				for i, o := range owners[2:] {
					d := sha256.Sum256([]byte(o))
					u := uploadRecord{Owner: o, Digest: fmt.Sprintf("%x", d), At: time.Date(2029, 1, 1, 0, 0, i, 0, time.UTC)}
					if err := tx.put(u, nil); err != nil {
						return err
					}
					j.uploads[o] = u
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return p, j
	}
	p, j := job()
	live := held(p, &j)
	// The least of three: memory another goroutine frees meanwhile would
	// count as the job's.
	archived := int64(math.MaxInt64)
	for range 3 {
		p, j = job()
		j.mu.Lock()
		if err := p.commit(j, func(prog *jobProgress) { prog.State = fedpcav1.JobState_JOB_STATE_DONE }, func(prog *jobProgress) error {
			return p.store.setProgress(j.id, prog)
		}); err != nil {
			t.Fatal(err)
		}
		j.mu.Unlock()
		archived = min(archived, held(p, &j))
	}
	t.Logf("a 10,000-owner job holds %d KiB of heap while it runs, %d KiB once archived", live>>10, archived>>10)
	if live < 1<<20 {
		t.Fatalf("a running 10,000-owner job holds %d KiB: the measure does not see the owners", live>>10)
	}
	if archived > 32<<10 {
		t.Fatalf("an archived 10,000-owner job holds %d KiB (more than 32)", archived>>10)
	}
}
