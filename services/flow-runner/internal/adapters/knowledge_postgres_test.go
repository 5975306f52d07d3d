package adapters

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/testenv"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/knowledge"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
	"github.com/parleyhq/parley/services/flow-runner/migrations"
)

// The store policies the splitter's golden tests hold: one document in
// English, one in Mongolian, each with returns, shipping and payment.
const (
	policyEN = "store_policy_en.md"
	policyMN = "store_policy_mn.md"
)

// knowledgeStore is a store over a fresh database, and that database, whose
// default trigram threshold is stricter than TrigramThreshold: a search
// that did not apply its own (Settings) would miss the Mongolian variants.
func knowledgeStore(t *testing.T) (*KnowledgeStore, *gorm.DB) {
	t.Helper()
	return knowledgeStoreWithDefault(t, "0.9")
}

// knowledgeStoreWithDefault is a store over a fresh database whose
// pg_trgm.word_similarity_threshold defaults to threshold, opened as the
// flow-runner opens it (with Settings).
func knowledgeStoreWithDefault(t *testing.T, threshold string) (*KnowledgeStore, *gorm.DB) {
	t.Helper()
	env := testenv.New(t, testenv.Migrated(Schema, migrations.FS))
	err := env.DB(t, Schema, migrations.FS).Exec(`DO $$ BEGIN
		EXECUTE format('ALTER DATABASE %I SET pg_trgm.word_similarity_threshold = %s', current_database(), ` + "'" + threshold + "'" + `);
	END $$`).Error
	if err != nil {
		t.Fatal(err)
	}
	gdb := env.DB(t, Schema, migrations.FS, Settings...)
	return NewKnowledgeStore(gdb), gdb
}

// addMarkdown splits markdown and adds it to the workspace's knowledge base.
func addMarkdown(t *testing.T, s *KnowledgeStore, ws, title, markdown string) *catalog.KnowledgeDocument {
	t.Helper()
	doc, err := knowledge.Split(title, []byte(markdown))
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.AddDocument(context.Background(), catalog.KnowledgeUpload{
		ID: uuid.Must(uuid.NewV7()).String(), WorkspaceID: ws, Title: doc.Title, Passages: doc.Passages, Now: time.Now().UTC(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// addPolicy adds one of the store policies.
func addPolicy(t *testing.T, s *KnowledgeStore, ws, file, title string) *catalog.KnowledgeDocument {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "domain", "knowledge", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return addMarkdown(t, s, ws, title, string(doc))
}

func search(t *testing.T, s *KnowledgeStore, ws, query string, topK int) []run.Passage {
	t.Helper()
	got, err := s.Search(context.Background(), ws, query, topK)
	if err != nil {
		t.Fatalf("Search(%q): %v", query, err)
	}
	if got == nil {
		t.Fatalf("Search(%q) = nil, want a list", query)
	}
	for i, p := range got {
		if p.Score <= 0 || p.Score >= 1 || (i > 0 && p.Score > got[i-1].Score) {
			t.Fatalf("Search(%q): scores out of [0,1) or order: %+v", query, got)
		}
	}
	return got
}

// TestKnowledgeSearchRanksTheAnswerFirst asks the store policies, both in
// one workspace, questions a customer would: in English and in Mongolian,
// sharing all or only some of their words with the answer.
func TestKnowledgeSearchRanksTheAnswerFirst(t *testing.T) {
	t.Parallel()
	s, _ := knowledgeStore(t)
	ws := uuid.NewString()
	addPolicy(t, s, ws, policyEN, "Store policy")
	addPolicy(t, s, ws, policyMN, "Дэлгүүрийн журам")
	tests := []struct {
		name      string
		query     string
		wantTitle string
		wantText  string
	}{
		{"returns window", "How many days do I have to return an item?", "Store policy › Returns › Return window", "You can return most items within 30 days"},
		{"some words only, delivery ~ deliver by trigrams", "Do you deliver to Darkhan by express?", "Store policy › Shipping › Shipping costs", "Express delivery"},
		{"pay ~ payment", "Can I pay with QPay?", "Store policy › Payment", "We accept the following payment methods"},
		{"refund timing", "When will I get my refund?", "Store policy › Returns › Refunds", "Once the warehouse receives"},
		{"tracking", "where is my parcel", "Store policy › Shipping › Tracking your order", "You receive a tracking link"},
		{"Mongolian returns window", "Бараагаа хэдэн хоногийн дотор буцааж болох вэ?", "Дэлгүүрийн журам › Буцаалт › Буцаах хугацаа", "Та худалдан авсан бараагаа"},
		{"Mongolian delivery time", "Хүргэлт хэдэн хоног болдог вэ?", "Дэлгүүрийн журам › Хүргэлт › Хүргэлтийн хугацаа", "14:00 цагаас өмнө"},
		{"Mongolian installments", "Хуваан төлж болох уу?", "Дэлгүүрийн журам › Төлбөр › Хуваан төлөх", "300,000 төгрөгөөс дээш"},
		{"Mongolian refund", "Буцаасан барааны мөнгө хэдэн өдрийн дотор орох вэ?", "Дэлгүүрийн журам › Буцаалт › Мөнгө буцаан олголт", "Илгээмж манай агуулахад"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := search(t, s, ws, tt.query, 3)
			if len(got) == 0 || got[0].Title != tt.wantTitle || !strings.HasPrefix(got[0].Text, tt.wantText) {
				t.Fatalf("first of %s", describe(got))
			}
			// The same question is answered the same way.
			if again := search(t, s, ws, tt.query, 3); describe(again) != describe(got) {
				t.Fatalf("asked again:\n%s\nfirst:\n%s", describe(again), describe(got))
			}
		})
	}
}

func describe(ps []run.Passage) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%.4f %s: %.40s\n", p.Score, p.Title, p.Text)
	}
	return b.String()
}

// TestKnowledgeSuffixVariants: a Mongolian word found only as another form
// of itself (no lexeme in common) still finds its passage, through
// trigrams; a word that is not there finds nothing.
func TestKnowledgeSuffixVariants(t *testing.T) {
	t.Parallel()
	s, _ := knowledgeStore(t)
	ws := uuid.NewString()
	addMarkdown(t, s, ws, "Журам", "## Буцаах\n\nБарааг 14 хоногийн дотор буцаах боломжтой.\n\n## Хүргэлт\n\nХүргэлт 3 хоног үргэлжилнэ.")
	tests := []struct {
		query string
		want  string
	}{
		{"буцааж", "Журам › Буцаах"},
		{"буцаалт", "Журам › Буцаах"},
		{"буцаана", "Журам › Буцаах"},
		{"хүргэлтийн", "Журам › Хүргэлт"},
	}
	for _, tt := range tests {
		got := search(t, s, ws, tt.query, 5)
		if len(got) != 1 || got[0].Title != tt.want {
			t.Errorf("%s: %s", tt.query, describe(got))
		}
	}
	if got := search(t, s, ws, "төлбөр", 5); len(got) != 0 {
		t.Errorf("an absent word found %s", describe(got))
	}
}

// TestKnowledgeTrigramThreshold: a word matches another by trigrams from
// TrigramThreshold on, whatever the server's default: буцааж finds буцаах
// (0.71) under a stricter default, болох does not find болно (0.5) under a
// looser one.
func TestKnowledgeTrigramThreshold(t *testing.T) {
	t.Parallel()
	tests := []struct {
		serverDefault string
		query         string
		want          int
	}{
		{"0.9", "буцааж", 1},
		{"0.3", "болох", 0},
	}
	for _, tt := range tests {
		t.Run(tt.serverDefault, func(t *testing.T) {
			t.Parallel()
			s, gdb := knowledgeStoreWithDefault(t, tt.serverDefault)
			var setting string
			if err := gdb.Raw(`SELECT current_setting('pg_trgm.word_similarity_threshold')`).Scan(&setting).Error; err != nil {
				t.Fatal(err)
			}
			if setting != "0.6" {
				t.Fatalf("the store's connections have threshold %s, want 0.6", setting)
			}
			ws := uuid.NewString()
			addMarkdown(t, s, ws, "Журам", "## Буцаах\n\nБарааг 14 хоногийн дотор буцаах.\n\n## Төлбөр\n\nКартаар төлж болно.")
			if got := search(t, s, ws, tt.query, 5); len(got) != tt.want {
				t.Errorf("%s under a server default of %s: %s, want %d passages", tt.query, tt.serverDefault, describe(got), tt.want)
			}
		})
	}
}

// TestKnowledgeSearchFindsNothing: a question with nothing to search for
// is an empty list, not an error.
func TestKnowledgeSearchFindsNothing(t *testing.T) {
	t.Parallel()
	s, _ := knowledgeStore(t)
	ws := uuid.NewString()
	addPolicy(t, s, ws, policyEN, "Store policy")
	tests := []struct {
		name  string
		ws    string
		query string
		topK  int
	}{
		{"empty", ws, "", 3},
		{"punctuation", ws, " ?! ", 3},
		{"stop words only", ws, "How do I do it?", 3},
		{"no shared word", ws, "zebra xylophone", 3},
		{"top_k 0", ws, "return", 0},
		{"unknown workspace", uuid.NewString(), "return", 3},
		{"malformed workspace", "nope", "return", 3},
	}
	for _, tt := range tests {
		if got := search(t, s, tt.ws, tt.query, tt.topK); len(got) != 0 {
			t.Errorf("%s: %s", tt.name, describe(got))
		}
	}
}

// TestKnowledgeTopK: at most top_k passages, never more than
// flow.MaxTopK, the first ones the same whatever the limit; equal scores
// in document order.
func TestKnowledgeTopK(t *testing.T) {
	t.Parallel()
	s, _ := knowledgeStore(t)
	ws := uuid.NewString()
	addPolicy(t, s, ws, policyEN, "Store policy")
	all := search(t, s, ws, "orders shipping returns payment days items", 100)
	if len(all) != 10 {
		t.Fatalf("top_k 100 gave %d passages, want 10", len(all))
	}
	for _, k := range []int{1, 3, 7} {
		if got := search(t, s, ws, "orders shipping returns payment days items", k); describe(got) != describe(all[:k]) {
			t.Errorf("top_k %d:\n%s\nwant\n%s", k, describe(got), describe(all[:k]))
		}
	}
	// Three passages alike but for their place: document order.
	same := addMarkdown(t, s, uuid.NewString(), "Same", "Umbrella rental.\n\nUmbrella rental.\n\nUmbrella rental.")
	got := search(t, s, same.WorkspaceID, "umbrella", 3)
	if len(got) != 3 || got[0].Score != got[2].Score {
		t.Fatalf("equal passages: %s", describe(got))
	}
}

// TestKnowledgeWorkspaces: a workspace sees, lists and deletes only its
// own documents.
func TestKnowledgeWorkspaces(t *testing.T) {
	t.Parallel()
	s, _ := knowledgeStore(t)
	ctx := context.Background()
	mine, other := uuid.NewString(), uuid.NewString()
	addPolicy(t, s, mine, policyEN, "Store policy")
	theirs := addMarkdown(t, s, other, "Secret", "# Returns\n\nReturn window of the other store: 90 days for every item.")

	for _, p := range search(t, s, mine, "how many days do I have to return an item", 10) {
		if strings.HasPrefix(p.Title, "Secret") {
			t.Fatalf("another workspace's passage: %+v", p)
		}
	}
	if got := search(t, s, other, "how many days do I have to return an item", 10); len(got) != 1 || got[0].Title != "Secret › Returns" {
		t.Fatalf("the other workspace: %s", describe(got))
	}
	list, err := s.ListDocuments(ctx, other)
	if err != nil || len(list) != 1 || list[0].ID != theirs.ID {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := s.DeleteDocument(ctx, mine, theirs.ID); !errors.Is(err, catalog.ErrDocumentNotFound) {
		t.Fatalf("deleting another workspace's document: %v", err)
	}
	if got := search(t, s, other, "return", 10); len(got) != 1 {
		t.Fatalf("a refused delete removed passages: %s", describe(got))
	}
}

// TestKnowledgeDocuments adds, lists and deletes documents: newest first
// with their passage counts; a deleted document's passages go with it.
func TestKnowledgeDocuments(t *testing.T) {
	t.Parallel()
	s, gdb := knowledgeStore(t)
	ctx := context.Background()
	ws := uuid.NewString()
	en := addPolicy(t, s, ws, policyEN, "Store policy")
	mn := addPolicy(t, s, ws, policyMN, "Дэлгүүрийн журам")
	if en.Passages != 15 || mn.Passages != 13 || en.WorkspaceID != ws || en.CreatedAt.IsZero() {
		t.Fatalf("added %+v and %+v", en, mn)
	}

	list, err := s.ListDocuments(ctx, ws)
	if err != nil || len(list) != 2 || *list[0] != *mn || *list[1] != *en {
		t.Fatalf("list: %+v %v, want %+v and %+v", list, err, mn, en)
	}
	for _, id := range []string{"", "nope"} {
		if list, err := s.ListDocuments(ctx, id); err != nil || list == nil || len(list) != 0 {
			t.Fatalf("list of %q: %+v %v", id, list, err)
		}
	}

	if err := s.DeleteDocument(ctx, ws, en.ID); err != nil {
		t.Fatal(err)
	}
	var left int64
	if err := gdb.Table(Schema+".kb_passages").Where("document_id = ?", en.ID).Count(&left).Error; err != nil || left != 0 {
		t.Fatalf("%d passages left (%v)", left, err)
	}
	if got := search(t, s, ws, "how many days do I have to return an item", 10); len(got) != 0 {
		t.Fatalf("a deleted document is still found: %s", describe(got))
	}
	if list, _ := s.ListDocuments(ctx, ws); len(list) != 1 || list[0].ID != mn.ID {
		t.Fatalf("list after delete: %+v", list)
	}
	for _, id := range []string{en.ID, uuid.NewString(), "nope"} {
		if err := s.DeleteDocument(ctx, ws, id); !errors.Is(err, catalog.ErrDocumentNotFound) {
			t.Fatalf("delete %q: %v", id, err)
		}
	}
	// Without a workspace, the document is deleted wherever it is.
	if err := s.DeleteDocument(ctx, "", mn.ID); err != nil {
		t.Fatal(err)
	}
}

// TestKnowledgeLargeDocument stores a document of more passages than one
// INSERT takes.
func TestKnowledgeLargeDocument(t *testing.T) {
	t.Parallel()
	s, _ := knowledgeStore(t)
	var b strings.Builder
	for i := range insertBatch*2 + 5 {
		fmt.Fprintf(&b, "## Question %d\n\nAnswer number %d.\n\n", i, i)
	}
	d := addMarkdown(t, s, uuid.NewString(), "FAQ", b.String())
	if d.Passages != insertBatch*2+5 {
		t.Fatalf("%d passages", d.Passages)
	}
	got := search(t, s, d.WorkspaceID, "question 1234", 1)
	if len(got) != 1 || got[0].Title != "FAQ › Question 1234" {
		t.Fatalf("%s", describe(got))
	}
}
