package transport

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A batch that starts long after the last one wrote (an idle connection
// taking a send) is written under a deadline of its own: the writer's
// buffer flushes to the socket as it fills, before the batch's last
// flush, so a deadline set only before that flush is the previous
// batch's, long past, and the connection failed its first big send.
func TestH2ClientWritesABatchUnderItsOwnDeadline(t *testing.T) {
	// FCM would refuse a body this big; the transport does not care.
	srv, ca, conns := tlsEmulator(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"name":"projects/h2/messages/1"}`)
	}), true)
	c := h2Client(t, srv.URL, ca, 4)
	c.h2.writeTimeout = time.Second
	if a := send(c, fcmBody("ok-first")); !a.ok() {
		t.Fatalf("first send: %+v", a)
	}
	// Past the first batch's deadline, with the connection idle.
	time.Sleep(3 * c.h2.writeTimeout / 2)
	// A body of four times the writer's buffer: three flushes as it fills.
	big := []byte(strings.Repeat("b", 4*writeBufferSize))
	if a := send(c, big); !a.ok() {
		t.Fatalf("a batch after an idle spell: %+v (written under the last batch's deadline?)", a)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want the one: the writer failed it", n)
	}
}
