package llm

import (
	"strings"
	"testing"
)

func TestParsePrices(t *testing.T) {
	t.Parallel()
	got, err := ParsePrices(" gpt-4o-mini=0.15/0.60, meta-llama/Llama-3.1-8B=0/0.000001 ,llama3.1:8b=1000/12,,")
	if err != nil {
		t.Fatal(err)
	}
	want := Prices{
		"gpt-4o-mini":             {InputMicroUSD: 150_000, OutputMicroUSD: 600_000},
		"meta-llama/Llama-3.1-8B": {InputMicroUSD: 0, OutputMicroUSD: 1},
		"llama3.1:8b":             {InputMicroUSD: 1_000_000_000, OutputMicroUSD: 12_000_000},
	}
	if len(got) != len(want) {
		t.Fatalf("ParsePrices = %v, want %v", got, want)
	}
	for model, p := range want {
		if got[model] != p {
			t.Errorf("%s = %+v, want %+v", model, got[model], p)
		}
	}
	if empty, err := ParsePrices(""); err != nil || len(empty) != 0 {
		t.Fatalf("ParsePrices(\"\") = %v, %v", empty, err)
	}
}

func TestParsePricesRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct{ give, want string }{
		{"gpt-4o-mini", "not model=input/output"},
		{"=0.15/0.60", "names no model"},
		{"gpt-4o=0.15", "input/output"},
		{"gpt-4o=0.15/0.60,gpt-4o=1/1", "priced twice"},
		{"gpt-4o=-1/0.60", "input price"},
		{"gpt-4o=0.15/1e3", "output price"},
		{"gpt-4o=0.1234567/1", "six decimals"},
		{"gpt-4o=.5/1", "input price"},
		{"gpt-4o=1000.000001/1", "over 1000 USD"},
		{"gpt-4o=1/99999999999999999999", "over 1000 USD"},
	}
	for _, tt := range tests {
		if _, err := ParsePrices(tt.give); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParsePrices(%q) = %v, want an error holding %q", tt.give, err, tt.want)
		}
	}
}

// The largest prices and token counts do not overflow.
func TestCostBounds(t *testing.T) {
	t.Parallel()
	p := Price{InputMicroUSD: maxPriceMicroUSD, OutputMicroUSD: maxPriceMicroUSD}
	if got := p.Cost(1<<40, 1<<40); got <= 0 || got != p.Cost(maxCountedTokens, maxCountedTokens) {
		t.Fatalf("Cost at the bounds = %v", got)
	}
	if got := p.Cost(-5, 1_000_000); got != 1000 {
		t.Fatalf("Cost of negative prompt tokens = %v, want them counted as 0", got)
	}
}
