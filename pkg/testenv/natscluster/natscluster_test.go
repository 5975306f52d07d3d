package natscluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parleyhq/parley/pkg/testenv/natscluster"
	"github.com/parleyhq/parley/pkg/testenv/wait"
)

// TestKilledLeaderLosesNothingOfAThreeReplicaStream is the kit's own
// check: a stream of three replicas keeps taking messages while its
// leader is dead, and the restarted server catches up.
func TestKilledLeaderLosesNothingOfAThreeReplicaStream(t *testing.T) {
	t.Parallel()
	c := natscluster.Start(t, 3)
	// Pinged every second, so a paused server is left within seconds.
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "KIT", Subjects: []string{"kit.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			wait.For(t, time.Minute, fmt.Sprintf("message %d stored", i), func() error {
				ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				_, err := js.Publish(ctx, "kit.x", []byte("m"), jetstream.WithMsgID(fmt.Sprint(i)))
				return err
			})
		}
	}
	publish(0, 100)

	leader := c.StreamLeader(t, "KIT")
	leader.Kill(t)
	publish(100, 200)
	if next := c.StreamLeader(t, "KIT"); next == leader {
		t.Fatalf("the killed %s still leads", leader.Name)
	}

	leader.Restart(t)
	paused := c.Servers()[0]
	if paused == leader {
		paused = c.Servers()[1]
	}
	paused.Pause(t)
	publish(200, 300)
	paused.Resume(t)

	wait.For(t, time.Minute, "every replica current with 300 messages", func() error {
		info, err := c.StreamInfo(ctx, "KIT")
		if err != nil {
			return err
		}
		if info.State.Msgs != 300 {
			return fmt.Errorf("%d messages", info.State.Msgs)
		}
		if len(info.Cluster.Replicas) != 2 {
			return fmt.Errorf("%d followers", len(info.Cluster.Replicas))
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current || r.Offline {
				return fmt.Errorf("replica %s not current", r.Name)
			}
		}
		return nil
	})
}
