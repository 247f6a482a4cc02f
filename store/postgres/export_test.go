package postgres

import "context"

// PreparedOnIdle returns, for each idle connection of s's pool, how many of
// the store's four lease statements the server holds prepared for it.
func PreparedOnIdle(ctx context.Context, s *Store) ([]int, error) {
	var out []int
	for _, c := range s.pool.AcquireAllIdle(ctx) {
		var n int
		err := c.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE statement = ANY($1)`,
			[]string{s.q.acquire, s.q.renew, s.q.release, s.q.get}).Scan(&n)
		c.Release()
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}
