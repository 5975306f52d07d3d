package cli

import (
	"context"
	"fmt"
	"unicode/utf8"

	flowrunnerapi "github.com/parleyhq/parley/pkg/api/flowrunner"
)

// kbAdd sends a Markdown document to the flow-runner, which splits it into
// passages and adds it to the workspace's knowledge base.
func kbAdd(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("kb add")
	wsID := f.String("workspace", "", "workspace id")
	title := f.String("title", "", "the document's title, shown before each passage's headings")
	file := f.String("file", "", "the Markdown document")
	if err := f.parse(args, "workspace", "title", "file"); err != nil {
		return err
	}
	markdown, err := readFile("kb add", *file)
	if err != nil {
		return err
	}
	// JSON would carry invalid bytes as U+FFFD without a word: a document
	// saved in another encoding is refused here instead of stored garbled.
	if !utf8.Valid(markdown) {
		return fmt.Errorf("kb add: %s is not UTF-8 text; save it as UTF-8 and add it again", *file)
	}
	d, err := c.api.AddDocument(ctx, *wsID, *title, string(markdown))
	if err != nil {
		return err
	}
	return c.print(added(d))
}

// addedDocument is what kb add prints of the flow-runner's answer.
type addedDocument struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Passages int    `json:"passages"`
}

func added(d flowrunnerapi.KnowledgeDocument) addedDocument {
	return addedDocument{ID: d.ID, Title: d.Title, Passages: d.Passages}
}

func kbList(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("kb list")
	wsID := f.String("workspace", "", "workspace id")
	if err := f.parse(args, "workspace"); err != nil {
		return err
	}
	docs, err := c.api.ListDocuments(ctx, *wsID)
	if err != nil {
		return err
	}
	return c.printAnswer(map[string]any{"documents": docs})
}

// kbDelete deletes a document; with --workspace only if it is that
// workspace's, a guard against a mistyped id.
func kbDelete(ctx context.Context, c *CLI, args []string) error {
	f := newFlags("kb delete")
	id := f.String("id", "", "document id")
	wsID := f.String("workspace", "", "delete only if the document is this workspace's")
	if err := f.parse(args, "id"); err != nil {
		return err
	}
	out, err := c.api.DeleteDocument(ctx, *id, *wsID)
	if err != nil {
		return err
	}
	return c.printAnswer(out)
}
