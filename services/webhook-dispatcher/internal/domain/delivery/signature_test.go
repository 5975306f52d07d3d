package delivery

import (
	"encoding/json"
	"os"
	"testing"
)

// The golden vector in testdata was computed outside Go, so a change to
// what is signed (order, separator, encoding) fails here.
func TestSignGoldenVector(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/signature.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Secret    string `json:"secret"`
		Timestamp int64  `json:"timestamp"`
		Body      string `json:"body"`
		Signature string `json:"signature"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if got := Sign(v.Secret, v.Timestamp, []byte(v.Body)); got != v.Signature {
		t.Fatalf("Sign = %s, want %s", got, v.Signature)
	}
	if !Verify(v.Secret, v.Timestamp, []byte(v.Body), v.Signature) {
		t.Fatal("Verify refused the golden signature")
	}
	for name, tamper := range map[string]func() (string, int64, []byte, string){
		"other secret": func() (string, int64, []byte, string) {
			return v.Secret + "x", v.Timestamp, []byte(v.Body), v.Signature
		},
		"other timestamp": func() (string, int64, []byte, string) { return v.Secret, v.Timestamp + 1, []byte(v.Body), v.Signature },
		"other body": func() (string, int64, []byte, string) {
			return v.Secret, v.Timestamp, []byte(v.Body + " "), v.Signature
		},
		"no prefix": func() (string, int64, []byte, string) {
			return v.Secret, v.Timestamp, []byte(v.Body), v.Signature[len("sha256="):]
		},
	} {
		if Verify(tamper()) {
			t.Errorf("%s: Verify accepted it", name)
		}
	}
}
