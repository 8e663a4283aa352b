package proxy

import (
	"fmt"
	"strings"
	"time"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
)

// What a running job tells users and owners (PROTOCOL.md section 9).
//
// The time an owner takes to compute its share grows with its rows (4.5 ms
// at 1,000 rows, 95 ms at 100,000 for d = 30), and so does the moment its
// upload arrives. Only the proxy sees that moment: while a job is open its
// users and owners learn its progress at public instants only, the job's
// creation plus whole multiples of the progress interval (a "tick"): the
// numbers of uploads and declines as the tick found them, never who
// uploaded or declined, nor when. Their watches send at ticks and state
// changes, not at uploads. A job whose owners have all answered is sealed
// at the first tick after the last answer (or at its deadline), so the seal
// shows no upload's moment either; once sealed, the owners in the release
// and the declines are listed (the user needs them for the accounting),
// without times. The status page and /status.json, for operators only,
// show everything.

// DefaultProgressInterval is Config.ProgressInterval's default, chosen from
// the measurement in docs/BENCHMARKS.md ("The progress tick"): with the
// owners' default upload hold of 1 s and shares within it, every answer of
// a three-owner job of d = 10 came at 1.06-1.74 s from its creation, so a
// grid of 2 s seals such a job at 2 s whether an owner holds a thousand
// rows or a million and tells the user nothing, as 5 s did, and the result
// is ready 3 s sooner (2.1-2.3 s from submit, against 5.2-5.3 s). 1.5 s
// kept 0.4 s over the hold, which a loaded machine crossed; 1 s sealed at
// 2 s anyway; a delay drawn at random told row counts apart in 0.6-0.9 of
// the jobs. A share that outlasts its owner's hold shows at the first tick
// it misses: its owner raises its hold (which hides it from the proxy too).
const DefaultProgressInterval = 2 * time.Second

// progressTick is the counts of a running job at a tick.
type progressTick struct {
	index              int64 // the tick: Created + index * interval
	uploaded, declined int
}

// tickAt returns the last tick at or before now and its instant.
func (j *jobState) tickAt(now time.Time) (int64, time.Time) {
	created := j.rec.Created
	if j.every <= 0 || now.Before(created) {
		return 0, created
	}
	i := int64(now.Sub(created) / j.every)
	return i, created.Add(time.Duration(i) * j.every)
}

// nextTick returns the first tick after now.
func (j *jobState) nextTick(now time.Time) time.Time {
	i, _ := j.tickAt(now)
	return j.rec.Created.Add(time.Duration(i+1) * j.every)
}

// publicCounts returns the numbers of uploads and declines of a running job
// as its last tick found them (answers recorded at or before the tick's
// instant), and that instant; j.mu must be held.
func (j *jobState) publicCounts(now time.Time) (uploaded, declined int, at time.Time) {
	i, at := j.tickAt(now)
	if j.tick != nil && j.tick.index == i {
		return j.tick.uploaded, j.tick.declined, at
	}
	t := &progressTick{index: i}
	for _, u := range j.uploads {
		if !u.At.After(at) {
			t.uploaded++
		}
	}
	for _, d := range j.declines {
		if !d.At.After(at) {
			t.declined++
		}
	}
	j.tick = t
	return t.uploaded, t.declined, at
}

// sealTime returns when a job whose owners have all answered is sealed: at
// the first tick at or after its last answer. j.mu must be held.
func (j *jobState) sealTime() time.Time {
	last := j.rec.Created
	for _, u := range j.uploads {
		if u.At.After(last) {
			last = u.At
		}
	}
	for _, d := range j.declines {
		if d.At.After(last) {
			last = d.At
		}
	}
	if j.every <= 0 {
		return last
	}
	i, at := j.tickAt(last)
	if at.Before(last) {
		at = j.rec.Created.Add(time.Duration(i+1) * j.every)
	}
	return at
}

// hideProgress makes a running job's status public: the counts as the last
// tick found them, the tick's instant as the last update, no owner lists
// and no upload timings. j.mu must be held.
func (j *jobState) hideProgress(s *fedpcav1.JobStatus, now time.Time, user bool) {
	if s.GetState() != fedpcav1.JobState_JOB_STATE_OPEN {
		return
	}
	u, d, at := j.publicCounts(now)
	s.OwnersUploaded, s.OwnersDeclined, s.UpdatedUnix = int32(u), int32(d), at.Unix()
	s.UploadedOwners, s.DeclinedOwners = nil, nil
	s.Timings = &fedpcav1.PhaseTimings{}
	s.Reason = "" // the proxy's reason counts every upload (upload.go)
	if u > 0 {
		s.Reason = fmt.Sprintf("%d of %d owners uploaded", u, j.spec.NumOwners)
	}
	if j.note != "" && user { // it names owners: the user's list, never an owner's to see
		s.Reason = strings.TrimPrefix(s.Reason+"; "+j.note, "; ")
	}
}

// uploadedShown is the number of uploads an uploading owner is told: the
// count of the last tick while the job is open. j.mu must be held.
func (j *jobState) uploadedShown() uint32 {
	if j.rec.State != fedpcav1.JobState_JOB_STATE_OPEN {
		return uint32(j.rec.Uploaded)
	}
	u, _, _ := j.publicCounts(time.Now())
	return uint32(u)
}
