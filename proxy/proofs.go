package proxy

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/transport"
)

// ownerProofs is what the committee members need of an owner's upload to
// verify it before a key switch: its certificate, its signature of the
// upload statement and, per ciphertext, the digest of c0, c1 and the
// proof of c1 (and c0 itself in an exact components job, job.Spec.BindsC0).
type ownerProofs struct {
	cert, signature []byte
	parts           []job.Part
	digests         []job.PartDigests
}

// An upload's proofs wait for the key switch in a file of their own,
// <store>/proofs/<job>/<owner>-<digest>.pb, not in the store's database:
// they are up to 712 KB per ciphertext, read once per member at the switch, and
// in the database's memory map they would count in the proxy's resident
// memory (1 GiB at 1,000 owners). The file holds the messages a member
// receives, each prefixed by its length (uvarint): the OwnerUpload, then
// one UploadPart per ciphertext. It is written durably (and its directory
// synced) before the upload is folded in, and named by the upload's digest,
// so that a refused upload of the same owner never replaces the included
// one's; a job's files are removed when it ends.

func (p *Proxy) proofDir(jobID string) string {
	return filepath.Join(p.cfg.Store, "proofs", jobID)
}

func (p *Proxy) proofPath(jobID, owner string, digest []byte) string {
	return filepath.Join(p.proofDir(jobID), owner+"-"+hex.EncodeToString(digest)+".pb")
}

// writeProofs stores an upload's proofs before it is folded in.
func (p *Proxy) writeProofs(jobID, owner string, digest []byte, pr *ownerProofs) error {
	msgs := []proto.Message{&fedpcav1.OwnerUpload{Owner: owner, Certificate: pr.cert, Signature: pr.signature}}
	size := 0
	for _, pt := range pr.parts {
		msgs = append(msgs, &fedpcav1.UploadPart{C0Digest: pt.C0Digest[:], C1: pt.C1, Proof: pt.Proof, C0: pt.C0})
		size += len(pt.C1) + len(pt.Proof) + len(pt.C0) + 64
	}
	b := make([]byte, 0, size+len(pr.cert)+len(pr.signature)+64)
	for _, m := range msgs {
		b = binary.AppendUvarint(b, uint64(proto.Size(m)))
		var err error
		if b, err = (proto.MarshalOptions{}).MarshalAppend(b, m); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(p.proofDir(jobID), 0o700); err != nil {
		return fmt.Errorf("store the upload's proofs: %w", err)
	}
	if err := transport.WriteFileAtomic(p.proofPath(jobID, owner, digest), b); err != nil {
		return fmt.Errorf("store the upload's proofs: %w", err)
	}
	return nil
}

// proofReader reads an owner's stored proofs back, message by message.
type proofReader struct {
	f *os.File
	r *bufio.Reader
}

func (p *Proxy) openProofs(jobID, owner string, digest []byte) (*proofReader, error) {
	f, err := os.Open(p.proofPath(jobID, owner, digest))
	if err != nil {
		return nil, fmt.Errorf("owner %s's upload proofs: %w", owner, err)
	}
	return &proofReader{f: f, r: bufio.NewReaderSize(f, 64<<10)}, nil
}

// next reads the next message into m.
func (r *proofReader) next(m proto.Message, buf *[]byte) error {
	n, err := binary.ReadUvarint(r.r)
	if err != nil {
		return err
	}
	if n > transport.MaxMessageBytes {
		return fmt.Errorf("a stored message of %d bytes", n)
	}
	if cap(*buf) < int(n) {
		*buf = make([]byte, n)
	}
	*buf = (*buf)[:n]
	if _, err := io.ReadFull(r.r, *buf); err != nil {
		return err
	}
	return proto.Unmarshal(*buf, m)
}

func (r *proofReader) Close() error { return r.f.Close() }

// dropEndedProofs removes, at start, the proofs of jobs that ended (a
// crash after a job's end was committed) or that the store does not know.
func (p *Proxy) dropEndedProofs() {
	entries, err := os.ReadDir(filepath.Join(p.cfg.Store, "proofs"))
	if err != nil {
		return
	}
	for _, e := range entries {
		if j := p.jobs[e.Name()]; j == nil || ended(j.rec.State) {
			p.dropProofs(e.Name())
		}
	}
}

// dropProofs removes an ended job's proofs.
func (p *Proxy) dropProofs(jobID string) {
	if err := os.RemoveAll(p.proofDir(jobID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		p.log.Warn("cannot remove an ended job's upload proofs", "job", jobID, "error", err)
	}
}
