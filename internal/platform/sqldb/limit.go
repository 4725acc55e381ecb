package sqldb

import (
	"strconv"
	"time"
)

// TimeLimited returns the SELECT stmt with a limit of d on its run that
// the server itself keeps: the driver's timeout (a context) only stops
// waiting for the answer, while the server runs the statement on, holding
// its read view. One text for both servers: MariaDB runs its executable
// comment (SET STATEMENT max_statement_time, seconds, error 1969) and
// reads the hint as a comment; MySQL reads that comment as a comment and
// keeps the hint (MAX_EXECUTION_TIME, milliseconds, error 3024). Either
// error is the server's answer to the statement (IsStatementError): the
// same statement would run out of time again. d < 1ms is no limit.
func TimeLimited(stmt string, d time.Duration) string {
	ms := d.Milliseconds()
	if ms <= 0 || len(stmt) < len("SELECT ") || stmt[:len("SELECT ")] != "SELECT " {
		return stmt
	}
	sec := strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)
	return "/*M! SET STATEMENT max_statement_time=" + sec + " FOR */ SELECT /*+ MAX_EXECUTION_TIME(" +
		strconv.FormatInt(ms, 10) + ") */ " + stmt[len("SELECT "):]
}

// IsTimeLimit reports the server's error for a statement that ran past
// its TimeLimited limit.
func IsTimeLimit(err error) bool {
	n, ok := serverErrorNumber(err)
	return ok && (n == errStatementTimeout || n == errQueryTimeout)
}

const (
	errStatementTimeout = 1969 // ER_STATEMENT_TIMEOUT (MariaDB's max_statement_time)
	errQueryTimeout     = 3024 // ER_QUERY_TIMEOUT (MySQL's MAX_EXECUTION_TIME)
)
