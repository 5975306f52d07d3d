package natsx

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// Placement is where a stream, or a durable consumer of one, lives in a
// NATS cluster, as JetStream reports it: shown to operators in each
// service's start log and on its /readyz (docs/operations.md "Probes").
type Placement struct {
	Stream string `json:"stream"`
	// Consumer is a durable consumer of Stream; empty for the stream.
	Consumer string `json:"consumer,omitempty"`
	// Replicas is how many servers hold it: the stream's setting; for a
	// consumer, which follows its stream (EnsureDurable), the servers it
	// is on.
	Replicas int `json:"replicas"`
	// Leader is the server that leads it; empty while it has none (an
	// election under way, or too few of its servers up).
	Leader string `json:"leader"`
	// Current are its servers that are up and caught up, the leader
	// first; Behind, those that are offline or catching up.
	Current []string `json:"current"`
	Behind  []string `json:"behind,omitempty"`
	// ReadAt is when it was read; Error, why the last read failed (the
	// rest is then the read before).
	ReadAt time.Time `json:"read_at"`
	Error  string    `json:"error,omitempty"`
}

// streamPlacement is the placement in info, a stream's; alone names the
// server that answered, which holds everything when JetStream is not
// clustered (it reports no placement then).
func streamPlacement(info *jetstream.StreamInfo, alone string) Placement {
	p := Placement{Stream: info.Config.Name, Replicas: max(info.Config.Replicas, 1), ReadAt: time.Now()}
	p.place(info.Cluster, alone)
	return p
}

// consumerPlacement is the placement in info, a consumer's (see
// streamPlacement).
func consumerPlacement(info *jetstream.ConsumerInfo, alone string) Placement {
	p := Placement{Stream: info.Stream, Consumer: info.Name, ReadAt: time.Now()}
	p.place(info.Cluster, alone)
	p.Replicas = info.Config.Replicas
	if p.Replicas == 0 {
		p.Replicas = len(p.Current) + len(p.Behind)
	}
	return p
}

func (p *Placement) place(c *jetstream.ClusterInfo, alone string) {
	p.Current, p.Behind = []string{}, nil
	if c == nil {
		p.Leader, p.Current = alone, []string{alone}
		return
	}
	p.Leader = c.Leader
	if c.Leader != "" {
		p.Current = append(p.Current, c.Leader)
	}
	for _, peer := range c.Replicas {
		if peer == nil {
			continue
		}
		if peer.Current && !peer.Offline {
			p.Current = append(p.Current, peer.Name)
		} else {
			p.Behind = append(p.Behind, peer.Name)
		}
	}
}

// Fields are p as log fields.
func (p Placement) Fields() []zap.Field {
	fields := []zap.Field{zap.String("stream", p.Stream)}
	if p.Consumer != "" {
		fields = append(fields, zap.String("consumer", p.Consumer))
	}
	return append(fields, zap.Int("replicas", p.Replicas), zap.String("leader", p.Leader),
		zap.Strings("current", p.Current), zap.Strings("behind", p.Behind))
}

// ReadPlacement reads where the stream or consumer that p names is now.
func ReadPlacement(ctx context.Context, js jetstream.JetStream, p Placement) (Placement, error) {
	if p.Consumer == "" {
		s, err := js.Stream(ctx, p.Stream)
		if err != nil {
			return p, fmt.Errorf("read stream %s: %w", p.Stream, err)
		}
		return streamPlacement(s.CachedInfo(), js.Conn().ConnectedServerName()), nil
	}
	c, err := js.Consumer(ctx, p.Stream, p.Consumer)
	if err != nil {
		return p, fmt.Errorf("read consumer %s on %s: %w", p.Consumer, p.Stream, err)
	}
	return consumerPlacement(c.CachedInfo(), js.Conn().ConnectedServerName()), nil
}

// Placements keeps the placement of a service's streams and durable
// consumers as last read, for /readyz to show: Run reads them again in the
// background, so a probe never waits on JetStream.
type Placements struct {
	js jetstream.JetStream

	mu   sync.Mutex
	last []Placement
}

// NewPlacements keeps the placement of each of of (a stream, or a
// consumer of one: Stream and Consumer name it), reading it first with
// ctx.
func NewPlacements(ctx context.Context, js jetstream.JetStream, of ...Placement) *Placements {
	p := &Placements{js: js, last: slices.Clone(of)}
	p.read(ctx)
	return p
}

// Last returns the placements as last read.
func (p *Placements) Last() []Placement {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.last)
}

// Run reads the placements again every interval until ctx ends.
func (p *Placements) Run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			p.read(ctx)
		}
	}
}

// readTimeout bounds one read of a placement.
const readTimeout = 5 * time.Second

func (p *Placements) read(ctx context.Context) {
	next := p.Last()
	for i, was := range next {
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		now, err := ReadPlacement(rctx, p.js, was)
		cancel()
		if err != nil {
			was.Error = err.Error()
			next[i] = was
			continue
		}
		next[i] = now
	}
	p.mu.Lock()
	p.last = next
	p.mu.Unlock()
}
