package storage

import (
	"context"
	"fmt"
	"testing"

	"github.com/memgate/memgate"
)

func TestCandidatesWaitForApproval(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	c, err := s.Propose(ctx, memgate.Write{ID: "idea", Text: "a proposed memory about glaciers", Tags: []string{"geo"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != "idea" || c.Version != 0 || c.Text != "a proposed memory about glaciers" {
		t.Fatalf("candidate = %+v", c)
	}
	if _, err := s.Get(ctx, "idea"); memgate.ErrorCode(err) != memgate.CodeNotFound {
		t.Fatalf("get sees a candidate: %v", err)
	}
	if res, _ := s.Search(ctx, memgate.Query{Text: "glaciers"}); len(res.Hits) != 0 {
		t.Fatal("search sees a candidate")
	}
	page, err := s.Candidates(ctx, "", 0)
	if err != nil || len(page.Memories) != 1 || page.Memories[0].ID != "idea" {
		t.Fatalf("candidates = %+v, %v", page, err)
	}
	m, err := s.Approve(ctx, "idea")
	if err != nil || m.Version == 0 || m.Text != c.Text || m.Tags[0] != "geo" {
		t.Fatalf("approve = %+v, %v", m, err)
	}
	if res, _ := s.Search(ctx, memgate.Query{Text: "glaciers"}); len(res.Hits) != 1 {
		t.Fatal("an approved memory is not found")
	}
	if page, _ := s.Candidates(ctx, "", 0); len(page.Memories) != 0 {
		t.Fatal("an approved candidate is still listed")
	}
	_, err = s.Approve(ctx, "idea")
	wantCode(t, err, memgate.CodeNotFound, "")
}

func TestRejectedCandidateLeavesNoTrace(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if _, err := s.Propose(ctx, memgate.Write{ID: "bad", Text: "not worth keeping"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Reject(ctx, "bad"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.Reject(ctx, "bad"), memgate.CodeNotFound, "")
	_, err := s.Approve(ctx, "bad")
	wantCode(t, err, memgate.CodeNotFound, "")
	st, _ := s.Stats(ctx)
	if st.Count != 0 {
		t.Fatalf("count = %d", st.Count)
	}
}

func TestCandidateKeepsItsCompareAndSet(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if _, err := s.Propose(ctx, memgate.Write{ID: "x", Text: "only if new", IfVersion: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	put(t, s, memgate.Write{ID: "x", Text: "written meanwhile"})
	_, err := s.Approve(ctx, "x")
	wantCode(t, err, memgate.CodeVersionConflict, "")
	if page, _ := s.Candidates(ctx, "", 0); len(page.Memories) != 1 {
		t.Fatal("a refused approval must keep the candidate")
	}
	_, err = s.Propose(ctx, memgate.Write{Text: "", ID: "y"})
	wantCode(t, err, memgate.CodeInvalidArgument, "text")
}

func TestCandidatesPage(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	for i := range 7 {
		if _, err := s.Propose(ctx, memgate.Write{ID: fmt.Sprint("c", i), Text: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	seen, cursor := 0, ""
	for {
		page, err := s.Candidates(ctx, cursor, 3)
		if err != nil {
			t.Fatal(err)
		}
		seen += len(page.Memories)
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if seen != 7 {
		t.Fatalf("paged through %d candidates, want 7", seen)
	}
	_, err := s.Candidates(ctx, "garbage", 3)
	wantCode(t, err, memgate.CodeInvalidArgument, "cursor")
}
