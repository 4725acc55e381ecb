package sqldb

// OpenWithIdleTx is Open with an idle transaction timeout of the test's
// choosing (Open's is 30 s).
var OpenWithIdleTx = open
