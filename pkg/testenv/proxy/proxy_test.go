package proxy

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with itself.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err = bufio.NewReader(c).ReadString('\n')
	return err
}

func TestCutClosesConnectionsAndRefusesNewOnesUntilRestored(t *testing.T) {
	t.Parallel()
	p := Start(t, echoServer(t))
	if err := roundTrip(p.Addr()); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	open, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := open.Write([]byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(open).ReadString('\n'); err != nil {
		t.Fatal(err)
	}

	p.Cut()
	_ = open.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := open.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("an open connection survived the cut: %v", err)
	}
	start := time.Now()
	if err := roundTrip(p.Addr()); err == nil || isTimeout(err) {
		t.Fatalf("a new connection during the cut: %v, want refused at once", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("refusal took %s", took)
	}

	p.Restore()
	if err := roundTrip(p.Addr()); err != nil {
		t.Fatalf("after restore: %v", err)
	}
}

func TestURLPointsAtTheProxy(t *testing.T) {
	t.Parallel()
	p := Start(t, "127.0.0.1:5432")
	got := p.URL(t, "postgres://postgres@127.0.0.1:5432/parley?sslmode=disable")
	if want := "postgres://postgres@" + p.Addr() + "/parley?sslmode=disable"; got != want {
		t.Fatalf("URL = %s, want %s", got, want)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
