package adapters

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/parleyhq/parley/pkg/db"

	"github.com/parleyhq/parley/services/flow-runner/internal/domain/catalog"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/flow"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/knowledge"
	"github.com/parleyhq/parley/services/flow-runner/internal/domain/run"
)

// KnowledgeStore keeps the knowledge bases in flows.kb_documents and
// flows.kb_passages, and searches them with PostgreSQL's full-text search
// and pg_trgm.
//
// A question is matched by its words, not as a whole: any passage that
// shares one is a candidate. Stop words (the 'english' configuration's)
// are left out; English words are stemmed; Cyrillic words are kept as
// written and matched, besides exactly, by trigram word similarity, so
// that a Mongolian suffix (буцааж, буцаах, буцаалт) does not hide a word.
// A candidate's score, in [0, 1), is the mean of
//
//   - rank: ts_rank_cd of its words against the OR of the question's,
//     a heading word weighing 1 and a text word 0.4, normalized as
//     rank/(rank+1);
//   - coverage: the share of the question's words it holds, a word counting
//     1 when one of its lexemes is there, else its trigram word similarity
//     to the passage when that reaches TrigramThreshold, else 0.
//
// Coverage rewards a passage that answers more of the question; rank
// breaks ties towards one whose headings name it. Equal scores are
// ordered by document (oldest first) and place in it.
type KnowledgeStore struct {
	db *gorm.DB
}

var (
	_ catalog.KnowledgeStore = (*KnowledgeStore)(nil)
	_ run.KnowledgeBase      = (*KnowledgeStore)(nil)
)

// TrigramThreshold is the word similarity from which a question's word
// counts as found in a passage (pg_trgm's default for its <% operator):
// буцааж matches буцаах at 0.71, болох does not match болно at 0.5.
const TrigramThreshold = 0.6

// insertBatch bounds the passages of one INSERT, well under PostgreSQL's
// 65535 parameters.
const insertBatch = 1000

// NewKnowledgeStore returns the store over gdb, opened for Schema with
// Settings.
func NewKnowledgeStore(gdb *gorm.DB) *KnowledgeStore {
	return &KnowledgeStore{db: gdb}
}

type kbDocumentRow struct {
	ID          string `gorm:"primaryKey"`
	WorkspaceID string
	Title       string
	Passages    int
	CreatedAt   time.Time `gorm:"autoCreateTime:false"`
}

func (kbDocumentRow) TableName() string { return Schema + ".kb_documents" }

func (r kbDocumentRow) toDomain() *catalog.KnowledgeDocument {
	return &catalog.KnowledgeDocument{
		ID: r.ID, WorkspaceID: r.WorkspaceID, Title: r.Title, Passages: r.Passages, CreatedAt: r.CreatedAt.UTC(),
	}
}

// kbPassageRow leaves out the generated columns (tsv, searchable), which
// PostgreSQL computes.
type kbPassageRow struct {
	DocumentID  string `gorm:"primaryKey"`
	Ordinal     int    `gorm:"primaryKey"`
	WorkspaceID string
	Title       string
	Heading     string
	Text        string
}

func (kbPassageRow) TableName() string { return Schema + ".kb_passages" }

// AddDocument implements catalog.KnowledgeStore. The document it returns
// has created_at as stored (microseconds), the same a list shows.
func (s *KnowledgeStore) AddDocument(ctx context.Context, u catalog.KnowledgeUpload) (*catalog.KnowledgeDocument, error) {
	doc := kbDocumentRow{
		ID: u.ID, WorkspaceID: u.WorkspaceID, Title: u.Title, Passages: len(u.Passages), CreatedAt: u.Now.Truncate(time.Microsecond),
	}
	rows := make([]kbPassageRow, len(u.Passages))
	for i, p := range u.Passages {
		rows[i] = kbPassageRow{DocumentID: u.ID, Ordinal: i, WorkspaceID: u.WorkspaceID, Title: p.Title, Heading: p.Heading, Text: p.Text}
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&doc).Error; err != nil {
			return fmt.Errorf("insert knowledge document: %w", err)
		}
		if err := tx.CreateInBatches(rows, insertBatch).Error; err != nil {
			return fmt.Errorf("insert knowledge passages: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return doc.toDomain(), nil
}

// ListDocuments implements catalog.KnowledgeStore.
func (s *KnowledgeStore) ListDocuments(ctx context.Context, workspaceID string) ([]*catalog.KnowledgeDocument, error) {
	if !validID(workspaceID) {
		return []*catalog.KnowledgeDocument{}, nil
	}
	var rows []kbDocumentRow
	err := s.db.WithContext(ctx).Where("workspace_id = ?", workspaceID).Order("created_at DESC, id DESC").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list knowledge documents: %w", err)
	}
	out := make([]*catalog.KnowledgeDocument, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.toDomain())
	}
	return out, nil
}

// DeleteDocument implements catalog.KnowledgeStore. The passages go with
// the document (ON DELETE CASCADE).
func (s *KnowledgeStore) DeleteDocument(ctx context.Context, workspaceID, documentID string) error {
	if !validID(documentID) || (workspaceID != "" && !validID(workspaceID)) {
		return catalog.ErrDocumentNotFound
	}
	q := s.db.WithContext(ctx).Where("id = ?", documentID)
	if workspaceID != "" {
		q = q.Where("workspace_id = ?", workspaceID)
	}
	res := q.Delete(&kbDocumentRow{})
	if res.Error != nil {
		return fmt.Errorf("delete knowledge document: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return catalog.ErrDocumentNotFound
	}
	return nil
}

// The words of a question go to PostgreSQL as one parameter, spaces
// between them: knowledge.Terms are runs of letters and digits, so a space
// parts them unambiguously and string_to_array gets them back.

// searchSQL keeps the question's words that are not stop words (term),
// makes the OR of their lexemes (question), finds the candidates through
// the two GIN indexes (any lexeme, or any word by trigrams) and scores them
// as KnowledgeStore says: one statement, one round trip. A question of stop
// words only has no term, a NULL OR and no candidate. The index's %>
// compares with the connection's pg_trgm.word_similarity_threshold, which
// Settings make TrigramThreshold; the score with the threshold given. Its
// parameters: the words, the workspace, TrigramThreshold and the limit.
const searchSQL = `WITH term AS MATERIALIZED (
    SELECT t AS word, n, plainto_tsquery('english', t) AS query
    FROM unnest(string_to_array(?, ' ')) WITH ORDINALITY AS u (t, n)
    WHERE to_tsvector('english', t) <> ''::tsvector
), question AS MATERIALIZED (
    SELECT array_agg(word ORDER BY n) AS words,
        string_agg('(' || query::text || ')', ' | ' ORDER BY n)::tsquery AS any_lexeme
    FROM term
), candidate AS (
    SELECT document_id, ordinal, title, text, tsv, searchable
    FROM ` + Schema + `.kb_passages
    WHERE workspace_id = ?
        AND (tsv @@ (SELECT any_lexeme FROM question) OR searchable %> ANY ((SELECT words FROM question)::text[]))
), scored AS (
    SELECT document_id, ordinal, title, text,
        ts_rank_cd('{0.1, 0.2, 0.4, 1.0}', tsv, (SELECT any_lexeme FROM question), 32) AS rank,
        (SELECT avg(CASE WHEN c.tsv @@ term.query THEN 1
                    ELSE (SELECT CASE WHEN sim >= ? THEN sim ELSE 0 END FROM word_similarity(term.word, c.searchable) AS sim)
                    END)
         FROM term) AS coverage
    FROM candidate AS c
)
SELECT title, text, round(((rank + coverage) / 2)::numeric, 4)::float8 AS score
FROM scored
ORDER BY score DESC, document_id, ordinal
LIMIT ?`

// Settings are what the store needs of each connection of its pool
// (db.Open): the trigram index's %> operator compares with
// pg_trgm.word_similarity_threshold, the score with TrigramThreshold, and
// they must be the same whatever the server's default.
var Settings = []db.Setting{{Name: "pg_trgm.word_similarity_threshold", Value: strconv.FormatFloat(TrigramThreshold, 'f', -1, 64)}}

// Search implements run.KnowledgeBase: at most topK passages (and
// flow.MaxTopK), best first. A question with no word to search for (empty,
// or stop words only) finds none.
func (s *KnowledgeStore) Search(ctx context.Context, workspaceID, query string, topK int) ([]run.Passage, error) {
	out := []run.Passage{}
	words := knowledge.Terms(query)
	if len(words) == 0 || topK <= 0 || !validID(workspaceID) {
		return out, nil
	}
	topK = min(topK, flow.MaxTopK)
	err := s.db.WithContext(ctx).Raw(searchSQL, strings.Join(words, " "), workspaceID, TrigramThreshold, topK).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("search knowledge base: %w", err)
	}
	if out == nil {
		out = []run.Passage{}
	}
	return out, nil
}
