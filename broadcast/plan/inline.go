package plan

import (
	"context"
	"database/sql"

	"pushfan/lease"
	"pushfan/model"
	"pushfan/repository"
)

// planNowUsers is the largest user_ids audience planned inside its submit:
// a transactional send (PUSHFAN_TRANSACTIONAL_USERS, 100) waits for no
// planner, and a longer list (up to PUSHFAN_MAX_USER_IDS) answers at once
// like every other audience.
const planNowUsers = 1000

// Inline plans a small user_ids audience inside the submit's
// transaction, or returns nil for one planned after the answer
// (lease.Planner).
func (s *Planner) Inline(ctx context.Context, tx *sql.Tx, b *model.Broadcast) (*lease.Step, error) {
	a := b.Audience
	if a.Name != "" || a.ResendOf != 0 || len(a.UserIDs) == 0 || len(a.UserIDs) > planNowUsers {
		return nil, nil
	}
	store, err := s.appStore(b)
	if err != nil {
		return nil, err
	}
	maxID, err := store.MaxTokenID(ctx, tx)
	if err != nil {
		return nil, err
	}
	width := s.planWidth(maxID)
	p := newPlanPass(b, width, s.in.Now(), s.opt.DefaultZone, 0, 0, nil)
	var rows []repository.PlanRow
	users := map[uint64]struct{}{} // a short list: its users, counted here
	for after := uint64(0); ; {
		if rows, err = store.PlanPage(ctx, tx, a, after, maxID, planStepRows, a.Local != nil, rows); err != nil {
			return nil, err
		}
		for _, r := range rows {
			if err := p.add(r); err != nil {
				return nil, err
			}
		}
		inlineUsers(rows, users)
		if len(rows) < planStepRows {
			break
		}
		after = rows[len(rows)-1].ID
	}
	st := p.flush(true)
	st.MaxCursor, st.Width = maxID, width
	n := int64(len(users))
	st.UsersTargeted = &n
	return &st, nil
}

// planWidth is the targets per chunk of a plan over token ids up to
// maxID: PUSHFAN_CHUNK_WIDTH, wider when PUSHFAN_MAX_CHUNKS chunks could
// not hold every id.
func (s *Planner) planWidth(maxID uint64) uint64 {
	w := max(s.opt.ChunkWidth, 1)
	if s.opt.MaxChunks > 0 {
		w = max(w, (maxID+uint64(s.opt.MaxChunks)-1)/uint64(s.opt.MaxChunks))
	}
	return w
}
