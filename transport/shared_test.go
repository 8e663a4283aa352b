package transport

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
)

type committeeServer struct {
	fedpcav1.UnimplementedProxyServiceServer
	resp   *fedpcav1.GetCommitteeResponse
	ticket *fedpcav1.JobInfo
}

// GetJob answers the shared ticket with a proof of the caller's own.
func (s *committeeServer) GetJob(_ context.Context, req *fedpcav1.GetJobRequest) (*fedpcav1.GetJobResponse, error) {
	return &fedpcav1.GetJobResponse{Job: s.ticket, OwnerProof: &fedpcav1.OwnerProof{Index: uint32(len(req.GetJobId())), Path: [][]byte{[]byte(req.GetJobId())}}}, nil
}

func (s *committeeServer) GetCommittee(context.Context, *fedpcav1.GetCommitteeRequest) (*fedpcav1.GetCommitteeResponse, error) {
	return s.resp, nil
}

// TestShare: a shared response is sent from the encoding made by Share (the
// test changes the message afterwards, which real code must not, to see
// which bytes went out), and after Unshare it is marshalled as usual.
func TestShare(t *testing.T) {
	creds := pki(t, "proxy/p", "owner/o1")
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(ServerOptions(creds["proxy/p"], false, hclog.NewNullLogger(), nil)...)
	resp := &fedpcav1.GetCommitteeResponse{PublicKey: make([]byte, 300<<10), PublicKeyFingerprint: "shared"}
	fedpcav1.RegisterProxyServiceServer(srv, &committeeServer{resp: resp})
	go srv.Serve(lis)
	defer srv.Stop()
	d := Dialer{Creds: creds["owner/o1"], Options: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })}}
	conn, err := d.Dial("passthrough:///bufnet", Identity{Role: RoleProxy})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	get := func() *fedpcav1.GetCommitteeResponse {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := fedpcav1.NewProxyServiceClient(conn).GetCommittee(ctx, &fedpcav1.GetCommitteeRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	Share(resp)
	resp.PublicKeyFingerprint = "changed"
	for range 3 {
		if r := get(); r.GetPublicKeyFingerprint() != "shared" || len(r.GetPublicKey()) != 300<<10 {
			t.Fatalf("got fingerprint %q and %d key bytes, want the shared encoding", r.GetPublicKeyFingerprint(), len(r.GetPublicKey()))
		}
	}
	Unshare(resp)
	if r := get(); r.GetPublicKeyFingerprint() != "changed" {
		t.Fatalf("after Unshare got %q, want the message marshalled anew", r.GetPublicKeyFingerprint())
	}
}

// TestShareEmbedded: a response built for one call that holds a shared
// message as a field is sent with that field's shared encoding and its own
// other fields.
func TestShareEmbedded(t *testing.T) {
	creds := pki(t, "proxy/p", "owner/o1")
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(ServerOptions(creds["proxy/p"], false, hclog.NewNullLogger(), nil)...)
	ticket := &fedpcav1.JobInfo{Spec: []byte("shared spec"), Schema: make([]byte, 100<<10), Status: &fedpcav1.JobStatus{JobId: "j"}}
	fedpcav1.RegisterProxyServiceServer(srv, &committeeServer{ticket: ticket})
	go srv.Serve(lis)
	defer srv.Stop()
	d := Dialer{Creds: creds["owner/o1"], Options: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })}}
	conn, err := d.Dial("passthrough:///bufnet", Identity{Role: RoleProxy})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	get := func(id string) *fedpcav1.GetJobResponse {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := fedpcav1.NewProxyServiceClient(conn).GetJob(ctx, &fedpcav1.GetJobRequest{JobId: id})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	Share(ticket)
	ticket.Spec = []byte("changed")
	for _, id := range []string{"a", "bcd"} {
		r := get(id)
		if string(r.GetJob().GetSpec()) != "shared spec" || len(r.GetJob().GetSchema()) != 100<<10 || r.GetJob().GetStatus().GetJobId() != "j" {
			t.Fatalf("got spec %q and %d schema bytes, want the shared encoding", r.GetJob().GetSpec(), len(r.GetJob().GetSchema()))
		}
		if p := r.GetOwnerProof(); p.GetIndex() != uint32(len(id)) || len(p.GetPath()) != 1 || string(p.GetPath()[0]) != id {
			t.Fatalf("call %q got its own part as %v", id, p)
		}
	}
	Unshare(ticket)
	if r := get("a"); string(r.GetJob().GetSpec()) != "changed" || r.GetOwnerProof().GetIndex() != 1 {
		t.Fatalf("after Unshare got %q, want the message marshalled anew", r.GetJob().GetSpec())
	}
}

// TestCiphertextRecycled: a ciphertext message is decoded into the buffer
// the previous one's handler gave back, not a new one.
func TestCiphertextRecycled(t *testing.T) {
	codec := sharingCodec{encoding.GetCodecV2("proto")}
	recv := func(b []byte) []byte {
		enc, err := proto.Marshal(&fedpcav1.UploadRequest{Msg: &fedpcav1.UploadRequest_Ciphertext{Ciphertext: b}})
		if err != nil {
			t.Fatal(err)
		}
		m := &fedpcav1.UploadRequest{}
		if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(enc)}, m); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.GetCiphertext(), b) {
			t.Fatalf("decoded %d bytes, sent %d", len(m.GetCiphertext()), len(b))
		}
		return m.GetCiphertext()
	}
	first := recv(bytes.Repeat([]byte{1}, 4096))
	RecycleCiphertext(first)
	if second := recv(bytes.Repeat([]byte{2}, 4096)); &second[0] != &first[0] {
		t.Fatal("the second ciphertext was not decoded into the recycled buffer")
	}
	if again := recv(bytes.Repeat([]byte{3}, 4096)); &again[0] == &first[0] {
		t.Fatal("a buffer still in use was handed out again")
	}
}
