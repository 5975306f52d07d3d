package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// flowPublish sends a flow document to the flow-runner, which validates it
// and stores a new immutable version. The file's bytes go as they are: the
// stored version is the document its author wrote, and a refusal naming a
// node and field reads against that file.
func flowPublish(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("flow publish")
	wsID := f.String("workspace", "", "workspace id")
	file := f.String("file", "", "the flow's JSON document")
	flowID := f.String("flow", "", "publish a new version of this flow instead of a new flow")
	if err := f.parse(args, "workspace", "file"); err != nil {
		return err
	}
	doc, err := readFlowFile(*file)
	if err != nil {
		return err
	}
	out, err := c.api.PublishFlow(ctx, *wsID, *flowID, doc)
	if err != nil {
		return err
	}
	return c.print(out)
}

// readFlowFile reads a flow document and checks that it is JSON, so that a
// stray comma is reported with its line here rather than as the service's
// refusal of a document it cannot read.
func readFlowFile(name string) ([]byte, error) {
	doc, err := readFile("flow publish", name)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			line, col := position(doc, syn.Offset)
			return nil, fmt.Errorf("flow publish: %s is not JSON: line %d, column %d: %v", name, line, col, err)
		}
		return nil, fmt.Errorf("flow publish: %s is not JSON: %v", name, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("flow publish: %s is not a flow: the document must be a JSON object", name)
	}
	return doc, nil
}

// position turns a byte offset into a 1-based line and column.
func position(doc []byte, offset int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < offset-1 && i < int64(len(doc)); i++ {
		if doc[i] == '\n' {
			line, col = line+1, 1
			continue
		}
		col++
	}
	return line, col
}

func flowDeactivate(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("flow deactivate")
	id := f.String("flow", "", "flow id")
	if err := f.parse(args, "flow"); err != nil {
		return err
	}
	out, err := c.api.DeactivateFlow(ctx, "", *id)
	if err != nil {
		return err
	}
	return c.printAnswer(out)
}
