package faultnet

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net"
	"sort"
	"strings"
	"sync"
	"time"
)

// Network is the simulator's fault injector, in the manner of etcd's bridge
// and raft's test network: every connection a simulated node opens or
// accepts passes through it. It can
//
//   - drop a request or a response, duplicate a call, or delay it (gRPC
//     client interceptors on the nodes' connections); a dropped message on
//     a stream breaks the stream, as a lost connection would;
//   - partition two nodes: their connections stall in both directions
//     until the partition heals, as a network that loses every packet
//     (TCP retransmits) would; calls in flight then end at their deadlines;
//   - crash a node: its listener and every connection it holds are closed
//     at once, so nothing it does afterwards reaches anyone.
//
// Whether a call is faulted is a pure function of the seed, the epoch (the
// chaos driver's step), the pair of nodes, the method and the number of
// earlier calls of that method between that pair in the epoch; so a run is
// reproduced from its seed (the interleaving of goroutines is not, but which
// call of which node meets which fault is). Safe for concurrent use.
type Network struct {
	mu     sync.Mutex
	seed   uint64
	epoch  uint64
	rates  Rates
	calls  map[string]uint64
	gates  map[string]*gate
	conns  map[string]map[*netConn]struct{} // node -> live connections it holds
	lis    map[string][]net.Listener        // node -> listeners it serves on
	down   map[string]bool                  // crashed nodes: connections to them are refused
	names  map[string]string                // dial address -> node
	counts map[string]int64                 // faults injected, by kind
	// delivered, if set, sees every response delivered to a client.
	delivered func(from, method string, resp any)
}

// Rates are the probabilities that a call meets each message fault.
type Rates struct {
	DropRequest, DropResponse, Duplicate, Delay float64
	// MaxDelay bounds an injected delay (default 200 ms).
	MaxDelay time.Duration
}

// Fault kinds, as counted by Network.Counts.
const (
	FaultDropRequest  = "drop_request"
	FaultDropResponse = "drop_response"
	FaultDuplicate    = "duplicate"
	FaultDelay        = "delay"
)

// NewNetwork returns a network without faults.
func NewNetwork(seed uint64) *Network {
	return &Network{seed: seed, calls: map[string]uint64{}, gates: map[string]*gate{}, conns: map[string]map[*netConn]struct{}{},
		lis: map[string][]net.Listener{}, down: map[string]bool{}, names: map[string]string{}, counts: map[string]int64{}}
}

// SetEpoch starts an epoch with the given fault rates (its calls are
// counted afresh).
func (n *Network) SetEpoch(epoch uint64, r Rates) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.epoch, n.rates, n.calls = epoch, r, map[string]uint64{}
}

// SetRates changes the rates within the epoch.
func (n *Network) SetRates(r Rates) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.rates = r
}

// OnDelivered sets a function that sees every response delivered to a
// client (not those the network dropped), e.g. upload acknowledgements.
func (n *Network) OnDelivered(fn func(from, method string, resp any)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.delivered = fn
}

func (n *Network) deliver(from, method string, resp any) {
	n.mu.Lock()
	fn := n.delivered
	n.mu.Unlock()
	if fn != nil {
		fn(from, method, resp)
	}
}

// Count adds to the count of a kind of fault (the driver counts its own:
// crashes, partitions).
func (n *Network) Count(kind string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.counts[kind]++
}

// Counts returns the faults injected so far, by kind.
func (n *Network) Counts() map[string]int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]int64, len(n.counts))
	for k, v := range n.counts {
		out[k] = v
	}
	return out
}

// Register names the node that serves at a dial address.
func (n *Network) Register(addr, node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.names[addr] = node
	n.names[strings.TrimPrefix(addr, "passthrough:///")] = node
}

func (n *Network) nodeAt(addr string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if name, ok := n.names[addr]; ok {
		return name
	}
	if name, ok := n.names[strings.TrimPrefix(addr, "passthrough:///")]; ok {
		return name
	}
	return addr
}

// fault is the decision for one call.
type fault struct {
	kind  string
	delay time.Duration
	at    int // message index at which a stream breaks
}

// Mix is splitmix64's finaliser.
func Mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func unit(x uint64) float64 { return float64(x>>11) / (1 << 53) }

// decide returns the fault (kind "" for none) of the next call of method
// from one node to another.
func (n *Network) decide(from, to, method string) fault {
	n.mu.Lock()
	defer n.mu.Unlock()
	key := from + ">" + to + method
	i := n.calls[key]
	n.calls[key] = i + 1
	h := fnv.New64a()
	var b [24]byte
	binary.LittleEndian.PutUint64(b[:], n.seed)
	binary.LittleEndian.PutUint64(b[8:], n.epoch)
	binary.LittleEndian.PutUint64(b[16:], i)
	h.Write(b[:])
	h.Write([]byte(key))
	x := Mix(h.Sum64())
	u, r := unit(x), n.rates
	y := Mix(x)
	f := fault{at: int(y % 3)}
	switch {
	case u < r.DropRequest:
		f.kind = FaultDropRequest
	case u < r.DropRequest+r.DropResponse:
		f.kind = FaultDropResponse
	case u < r.DropRequest+r.DropResponse+r.Duplicate:
		f.kind = FaultDuplicate
	case u < r.DropRequest+r.DropResponse+r.Duplicate+r.Delay:
		f.kind = FaultDelay
		maxDelay := r.MaxDelay
		if maxDelay <= 0 {
			maxDelay = 200 * time.Millisecond
		}
		f.delay = time.Duration(unit(Mix(y)) * float64(maxDelay))
	}
	return f
}

// gate is the partition state of a pair of nodes.
type gate struct {
	mu     sync.Mutex
	cut    bool
	healed chan struct{}
}

// wait blocks while the pair is cut; it reports false if done closed first.
func (g *gate) wait(done <-chan struct{}) bool {
	for {
		g.mu.Lock()
		if !g.cut {
			g.mu.Unlock()
			return true
		}
		ch := g.healed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}

func pairKey(a, b string) string {
	if a > b {
		a, b = b, a
	}
	return a + "|" + b
}

func (n *Network) gate(a, b string) *gate {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := pairKey(a, b)
	g := n.gates[k]
	if g == nil {
		g = &gate{}
		n.gates[k] = g
	}
	return g
}

// Partition cuts every pair (a, b) with a in as and b in bs.
func (n *Network) Partition(as, bs []string) {
	for _, a := range as {
		for _, b := range bs {
			g := n.gate(a, b)
			g.mu.Lock()
			if !g.cut {
				g.cut, g.healed = true, make(chan struct{})
			}
			g.mu.Unlock()
		}
	}
}

// Heal ends the partition of every pair (a, b) with a in as and b in bs.
func (n *Network) Heal(as, bs []string) {
	for _, a := range as {
		for _, b := range bs {
			n.heal(n.gate(a, b))
		}
	}
}

// HealAll ends every partition.
func (n *Network) HealAll() {
	n.mu.Lock()
	gates := make([]*gate, 0, len(n.gates))
	for _, g := range n.gates {
		gates = append(gates, g)
	}
	n.mu.Unlock()
	for _, g := range gates {
		n.heal(g)
	}
}

func (n *Network) heal(g *gate) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cut {
		g.cut = false
		close(g.healed)
	}
}

// netConn is a connection through the network: it stalls while its pair is
// partitioned and is closed when the node holding it crashes.
type netConn struct {
	net.Conn
	n      *Network
	node   string
	gate   *gate // nil: never partitioned (server ends; the client end gates)
	closed chan struct{}
	once   sync.Once
}

func (n *Network) track(node string, c net.Conn, g *gate) (*netConn, error) {
	nc := &netConn{Conn: c, n: n, node: node, gate: g, closed: make(chan struct{})}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down[node] {
		c.Close()
		return nil, fmt.Errorf("faultnet: node %s is down", node)
	}
	if n.conns[node] == nil {
		n.conns[node] = map[*netConn]struct{}{}
	}
	n.conns[node][nc] = struct{}{}
	return nc, nil
}

func (c *netConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	if c.gate != nil && !c.gate.wait(c.closed) {
		return 0, net.ErrClosed
	}
	return k, err
}

func (c *netConn) Write(p []byte) (int, error) {
	if c.gate != nil && !c.gate.wait(c.closed) {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

func (c *netConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.n.mu.Lock()
		delete(c.n.conns[c.node], c)
		c.n.mu.Unlock()
	})
	return c.Conn.Close()
}

// Dial opens a connection from a node to the node serving at addr with the
// given raw dial function, or refuses it if either is down.
func (n *Network) Dial(ctx context.Context, from, addr string, dial func(context.Context, string) (net.Conn, error)) (net.Conn, error) {
	to := n.nodeAt(addr)
	n.mu.Lock()
	down := n.down[to]
	n.mu.Unlock()
	if down {
		return nil, fmt.Errorf("faultnet: connection to %s refused: node down", to)
	}
	c, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return n.track(from, c, n.gate(from, to))
}

// Listen wraps a node's listener: its connections are closed when it
// crashes.
func (n *Network) Listen(node string, l net.Listener) net.Listener {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lis[node] = append(n.lis[node], l)
	delete(n.down, node)
	return &netListener{Listener: l, n: n, node: node}
}

type netListener struct {
	net.Listener
	n    *Network
	node string
}

func (l *netListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		nc, err := l.n.track(l.node, c, nil)
		if err == nil {
			return nc, nil
		}
	}
}

// Crash closes a node's listeners and every connection it holds, at once,
// and refuses new ones until it listens again (or Up).
func (n *Network) Crash(node string) {
	n.mu.Lock()
	n.down[node] = true
	lis := n.lis[node]
	delete(n.lis, node)
	conns := make([]*netConn, 0, len(n.conns[node]))
	for c := range n.conns[node] {
		conns = append(conns, c)
	}
	n.mu.Unlock()
	for _, l := range lis {
		l.Close()
	}
	for _, c := range conns {
		c.Close()
	}
}

// Up lets a crashed node (one that only dials) connect again.
func (n *Network) Up(node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.down, node)
}

// FaultCounts formats counts by kind, sorted.
func FaultCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
