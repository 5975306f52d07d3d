package natscluster_test

import (
	"context"
	"fmt"
	"slices"
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
		// Each read bounded: one the cluster drops while a resumed
		// server catches up is asked again, not waited on to the end.
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
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

// TestServersTellTheirClientsVersionAndPid: each server lists the client
// connections it has by name, runs a nats-server that leaves a frozen
// peer while messages flow to it (2.9.16 or later), and has a pid while it
// runs and none once killed.
func TestServersTellTheirClientsVersionAndPid(t *testing.T) {
	t.Parallel()
	c := natscluster.Start(t, 3)
	nc, err := nats.Connect(c.URL(), nats.Name("kit-client"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	on := c.Server(nc.ConnectedServerName())
	if on == nil {
		t.Fatalf("connected to %q, none of the cluster's", nc.ConnectedServerName())
	}
	names, err := on.Clients()
	if err != nil || !slices.Contains(names, "kit-client") {
		t.Fatalf("%s's clients %v, %v; want kit-client among them", on.Name, names, err)
	}
	var major, minor, patch int
	if _, err := fmt.Sscanf(nc.ConnectedServerVersion(), "%d.%d.%d", &major, &minor, &patch); err != nil ||
		major != 2 || minor < 9 || minor == 9 && patch < 16 {
		t.Errorf("nats-server %s (%v), want 2.9.16 or a later 2.x", nc.ConnectedServerVersion(), err)
	}
	for _, s := range c.Servers() {
		if s.Pid() == 0 {
			t.Errorf("%s: pid 0 while it runs", s.Name)
		}
	}
	on.Kill(t)
	if on.Pid() != 0 {
		t.Errorf("%s: pid %d once killed", on.Name, on.Pid())
	}
}
