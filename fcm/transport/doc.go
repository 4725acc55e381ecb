// Package transport is pushfan's HTTP client for one kind of traffic: many
// small POSTs of prepared bodies to one URL, thousands in flight at once,
// each answered in a few hundred bytes. It holds an HTTP/2 client (h2*.go),
// an HTTP/1.1 client for plain http:// endpoints (h1*.go), and a pool of
// net/http transports that follows the requests in flight (connpool.go).
// It knows nothing of FCM: fcm's direct client hands it a URL, the headers
// and a body per request, and classifies the Result it gets back; the
// firebase SDK's path sends through the same ConnPool.
//
// # Why not net/http
//
// Measured sending to FCM's emulator at thousands of requests in flight
// (docs/PERFORMANCE.md), net/http cost what the rest of pushfan did not:
//   - over HTTP/2, a goroutine and a pipe per stream, and one TLS record and
//     one write system call per request: most of the client's CPU;
//   - over HTTP/2, a new connection for every request that found the open
//     ones' streams taken, dropped again soon after (35,748 TLS handshakes
//     for one broadcast at 4,000 in flight);
//   - over HTTP/1.1, two goroutines and 8 KB of buffers per connection, and
//     a dial for every request that found no idle connection (2,601
//     connections for 986 requests in flight; 185–255 MB of RSS at 4,096).
//
// So the HTTP/2 client writes, per connection, from one writer goroutine:
// the HEADERS and DATA frames of every request queued since its last turn
// go into one 16 KB buffer and out in one TLS record and one write. One
// reader goroutine per connection hands each answer to the request waiting
// for it; a request costs no goroutine. Framing and HPACK are
// golang.org/x/net/http2's. The header block (Options.Header, the
// User-Agent net/http would add, and what Options.Auth adds) is encoded
// once, "never indexed", valid on every connection. The HTTP/1.1 client
// writes each request from a pooled buffer and reads its answer on the
// requester's own goroutine; a connection is its socket and a 1 KB read
// buffer.
//
// # What it guarantees
//
//   - The same request as net/http: the HTTP/2 client sends the header set
//     net/http sends through Options.Fallback (less Accept-Encoding), the
//     HTTP/1.1 client the head net/http writes; bodies are sent as given.
//     Answers read the same: a Result keeps the status, an error answer's
//     headers, and MaxSuccessBody or MaxErrorBody of the body, the rest
//     read and dropped.
//   - Connections follow the requests in flight. HTTP/2: a connection
//     carries up to the server's MAX_CONCURRENT_STREAMS (100 at FCM, at
//     most 1,000) and another is dialled only when every open one is full:
//     Concurrency/limit + 1 at most. HTTP/1.1: a connection is dialled only
//     while the requests waiting outnumber the dials under way (16 at most
//     at once), so never more than the requests in flight, at most
//     Concurrency + 16. The ConnPool does the same for net/http's HTTP/2
//     (one connection per transport, 100 requests a transport).
//   - HTTP/2 is honoured: flow control both ways, the server's SETTINGS,
//     PING after 15 s with nothing read (the connection closed if the next
//     15 s bring nothing either), idle connections closed after 90 s, and
//     GOAWAY: the streams the server did not take fail (they were not
//     processed: the caller may send them again), the others run to their
//     end, and the connection closes. A connection whose stream ids run out
//     does the same of its own accord. A request that could not be queued
//     on a connection that failed or went away meanwhile is handed to
//     another (it had not left).
//   - Every batch of writes has a deadline of its own (10 s): a server
//     that stops reading fails its connection instead of holding the
//     writer, and an idle connection's next batch is not written under
//     the last one's long-past deadline.
//   - The request's context bounds it: when it ends, an HTTP/2 stream is
//     reset (its connection goes on), an HTTP/1.1 connection is dropped (an
//     answer may still come on it), a request waiting for a connection
//     stops waiting.
//   - A Result's Err with the request's context ended is the context's
//     doing; any other Err is the network's (the request may or may not
//     have reached the server). A request is never answered twice, and
//     every started request gets its Result.
//   - HTTPS_PROXY: the HTTP/2 client opens a CONNECT tunnel as net/http
//     does; other proxies, a TLS server that does not negotiate h2, and a
//     proxied http:// URL go to Options.Fallback.
//   - Close ends every goroutine: the connections' readers and writers and
//     the dials, and fails the requests in flight.
//
// # Memory
//
// Thousands of requests wait at once, each on a goroutine of its caller.
// Start goes through the deep part of a send (the header block, a stream
// slot or a connection, the queue or the write) and returns; the caller
// waits in Pending.Wait from a shallow frame, so a parked goroutine keeps
// a 4 KB stack, not 8 KB. The caller's own work on the answer (fcm's
// classification) is the finish function New takes, called after the wait
// rather than wrapped around it: a wrapper would be one more frame under
// every parked request. Per HTTP/2 stream the client holds the body until
// it is written and at most MaxErrorBody of answer; per connection a 16 KB
// write buffer, a 16 KB read buffer, one frame being read (16 KB at most)
// and a 4 KB HPACK table.
//
// Its errors read "fcm: ...", as they did when this was part of fcm:
// they reach the outcomes' details that operators read.
package transport
