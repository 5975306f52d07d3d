package llm

import (
	"fmt"
	"strconv"
	"strings"
)

// Price is what a model's tokens cost, in millionths of a USD per million
// tokens (0.15 USD is 150000): a call's cost is summed in integers and
// turned into dollars once, so 1000 tokens at 0.15 cost exactly 0.00015.
type Price struct {
	InputMicroUSD  int64
	OutputMicroUSD int64
}

// Prices is the price table, by model name as requests give it.
type Prices map[string]Price

// maxPriceMicroUSD bounds one price (1000 USD per million tokens, above
// any model's list price), and maxCountedTokens the tokens one call is
// priced for, so that their product never overflows an int64.
const (
	maxPriceMicroUSD = 1000 * 1_000_000
	maxCountedTokens = 1 << 32
)

// Cost is the price of a call's prompt (input) and completion (output)
// tokens, in USD.
func (p Price) Cost(promptTokens, completionTokens int) float64 {
	in := int64(min(max(promptTokens, 0), maxCountedTokens))
	out := int64(min(max(completionTokens, 0), maxCountedTokens))
	return float64(in*p.InputMicroUSD+out*p.OutputMicroUSD) / 1e12
}

// ParsePrices reads LLM_PRICES: "model=input/output" entries separated by
// commas, the prices in USD per million tokens with at most six decimals
// ("gpt-4o-mini=0.15/0.60,gpt-4o=2.50/10.00"). A model name may hold "/"
// and ":" (vLLM's "meta-llama/Llama-3.1-8B", Ollama's "llama3.1:8b"), so
// the last "=" ends it. Empty is an empty table.
func ParsePrices(s string) (Prices, error) {
	out := Prices{}
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		eq := strings.LastIndex(entry, "=")
		if eq < 0 {
			return nil, fmt.Errorf("%q is not model=input/output", entry)
		}
		model, prices := strings.TrimSpace(entry[:eq]), entry[eq+1:]
		if model == "" {
			return nil, fmt.Errorf("%q names no model", entry)
		}
		if _, dup := out[model]; dup {
			return nil, fmt.Errorf("model %q is priced twice", model)
		}
		in, outPrice, ok := strings.Cut(prices, "/")
		if !ok {
			return nil, fmt.Errorf("%q: the prices must be input/output", entry)
		}
		var p Price
		var err error
		if p.InputMicroUSD, err = parseMicroUSD(in); err != nil {
			return nil, fmt.Errorf("%q: input price: %w", entry, err)
		}
		if p.OutputMicroUSD, err = parseMicroUSD(outPrice); err != nil {
			return nil, fmt.Errorf("%q: output price: %w", entry, err)
		}
		out[model] = p
	}
	return out, nil
}

// parseMicroUSD reads a price in USD ("2.50") as millionths of a USD,
// digit by digit, so that no binary fraction creeps in.
func parseMicroUSD(s string) (int64, error) {
	s = strings.TrimSpace(s)
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(frac) > 6 || !digits(whole) || !digits(frac) {
		return 0, fmt.Errorf("%q is not a price in USD with at most six decimals", s)
	}
	frac += strings.Repeat("0", 6-len(frac))
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil || n > maxPriceMicroUSD {
		return 0, fmt.Errorf("%q is over 1000 USD per million tokens", s)
	}
	return n, nil
}

func digits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
