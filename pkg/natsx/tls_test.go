package natsx_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/config"
	"github.com/parleyhq/parley/pkg/natsx"
	"github.com/parleyhq/parley/pkg/testenv/ports"
)

// TestConnectOverTLS: NATS_TLS_CA makes the server's certificate trusted;
// with mutual TLS the client certificate (NATS_TLS_CERT, NATS_TLS_KEY) is
// what admits the client.
func TestConnectOverTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, caKey := writeCA(t, dir)
	serverCert := issue(t, dir, "server", ca, caKey, x509.ExtKeyUsageServerAuth)
	issue(t, dir, "client", ca, caKey, x509.ExtKeyUsageClientAuth)

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	srvTLS := &tls.Config{
		Certificates: []tls.Certificate{serverCert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}
	srv, err := natsserver.NewServer(&natsserver.Options{
		Host: "127.0.0.1", Port: ports.Free(t, 1)[0], NoLog: true, NoSigs: true,
		TLS: true, TLSVerify: true, TLSConfig: srvTLS, TLSTimeout: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(srv.Shutdown)
	url := "tls://" + srv.Addr().String()

	tests := []struct {
		name string
		sec  config.NATSSecurity
		ok   bool
	}{
		{"CA and client certificate", config.NATSSecurity{NATSTLSCA: filepath.Join(dir, "ca.pem"), NATSTLSCert: filepath.Join(dir, "client.pem"), NATSTLSKey: filepath.Join(dir, "client-key.pem")}, true},
		{"no client certificate", config.NATSSecurity{NATSTLSCA: filepath.Join(dir, "ca.pem")}, false},
		{"server not trusted", config.NATSSecurity{NATSTLSCert: filepath.Join(dir, "client.pem"), NATSTLSKey: filepath.Join(dir, "client-key.pem")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			nc, err := natsx.Connect(ctx, config.Connections{NATSURL: url, NATSSecurity: tt.sec}, "test", zap.NewNop())
			if tt.ok {
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				if !nc.TLSRequired() {
					t.Error("connected without TLS")
				}
				nc.Close()
				return
			}
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
		})
	}
}

func writeCA(t *testing.T, dir string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "parley test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", der)
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

// issue signs a certificate for 127.0.0.1 and writes NAME.pem and
// NAME-key.pem.
func issue(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	writePEM(t, filepath.Join(dir, name+"-key.pem"), "EC PRIVATE KEY", keyDER)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
