package flow

import (
	"os"
	"testing"
)

func BenchmarkParse(b *testing.B) {
	data := mustReadB(b, "testdata/valid/every_node.json")
	for b.Loop() {
		if _, err := Parse(data, ParseOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func mustReadB(b *testing.B, path string) []byte {
	b.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return data
}
