package teststack

import (
	"fmt"
	"strings"
)

// Token is one seeded device token and what the test expects for it.
type Token struct {
	UserID   uint64
	Token    string
	Eligible bool   // the audience rule selects it
	Dead     string // the FCM code the emulator answers for it, "" if it succeeds
}

// Population is a seeded audience with its expected outcome computed in Go,
// independently of the SQL under test.
type Population struct {
	Tokens []Token
}

// Eligible returns the tokens an "all" broadcast must target.
func (p Population) Eligible() []Token {
	var out []Token
	for _, t := range p.Tokens {
		if t.Eligible {
			out = append(out, t)
		}
	}
	return out
}

// SeedPopulation inserts users 1..users: every 10th has push disabled; user
// i has 1 + i%3 tokens; some tokens are already invalidated, and some are
// named so the emulator answers UNREGISTERED or INVALID_ARGUMENT.
// tokenPrefix lets a test add behaviour (e.g. "flaky1xinternal-").
func (s *Stack) SeedPopulation(users int) Population {
	s.T.Helper()
	var p Population
	var userRows, tokenRows []string
	for i := 1; i <= users; i++ {
		enabled := i%10 != 0
		userRows = append(userRows, fmt.Sprintf("(%d,%t)", i, enabled))
		for k := 0; k < 1+i%3; k++ {
			tok := Token{UserID: uint64(i), Token: fmt.Sprintf("tok-%d-%d", i, k)}
			invalidated := k == 1 && i%41 == 0
			switch {
			case k == 0 && i%37 == 0:
				tok.Token = fmt.Sprintf("unregistered-%d", i)
				tok.Dead = "UNREGISTERED"
			case k == 0 && i%53 == 0:
				tok.Token = fmt.Sprintf("invalid-%d", i)
				tok.Dead = "INVALID_ARGUMENT"
			}
			tok.Eligible = enabled && !invalidated
			inv := "NULL"
			if invalidated {
				inv = "NOW(6)"
			}
			tokenRows = append(tokenRows, fmt.Sprintf("(%d,'%s',%s)", i, tok.Token, inv))
			p.Tokens = append(p.Tokens, tok)
		}
	}
	s.bulkInsert("INSERT INTO users (id, push_enabled) VALUES ", userRows)
	s.bulkInsert("INSERT INTO device_tokens (user_id, token, invalidated_at) VALUES ", tokenRows)
	return p
}

func (s *Stack) bulkInsert(prefix string, rows []string) {
	s.T.Helper()
	for len(rows) > 0 {
		n := min(len(rows), 1000)
		s.MustExec(prefix + strings.Join(rows[:n], ","))
		rows = rows[n:]
	}
}

// SeedTokens inserts one enabled user per token with the given names.
func (s *Stack) SeedTokens(firstUserID int, tokens []string) {
	s.T.Helper()
	var userRows, tokenRows []string
	for i, tk := range tokens {
		uid := firstUserID + i
		userRows = append(userRows, fmt.Sprintf("(%d,1)", uid))
		tokenRows = append(tokenRows, fmt.Sprintf("(%d,'%s')", uid, tk))
	}
	s.bulkInsert("INSERT INTO users (id, push_enabled) VALUES ", userRows)
	s.bulkInsert("INSERT INTO device_tokens (user_id, token) VALUES ", tokenRows)
}

// PlatformOfTokens maps every token of device_tokens to the platform its
// sends and events count under: its platform column in lower case, other
// where it has none.
func (s *Stack) PlatformOfTokens() map[string]string {
	s.T.Helper()
	out := map[string]string{}
	rows, err := s.SQL.Query("SELECT token, COALESCE(LOWER(platform), 'other') FROM device_tokens")
	if err != nil {
		s.T.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var tok, p string
		if err := rows.Scan(&tok, &p); err != nil {
			s.T.Fatal(err)
		}
		out[tok] = p
	}
	if err := rows.Err(); err != nil {
		s.T.Fatal(err)
	}
	return out
}
