package fcm

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"pushfan/fanout"
)

// A batch that starts long after the last one wrote (an idle connection
// taking a send) is written under a deadline of its own: the writer's
// buffer flushes to the socket as it fills, before the batch's last
// flush, so a deadline set only before that flush is the previous
// batch's, long past, and the connection failed its first big send.
func TestH2ClientWritesABatchUnderItsOwnDeadline(t *testing.T) {
	// FCM would refuse a message this big; the transport does not care.
	srv, ca, conns := tlsEmulator(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"name":"projects/h2/messages/1"}`)
	}), true)
	c := h2Client(t, srv.URL, ca, 4)
	c.direct.h2.writeTimeout = time.Second
	if out := send(t, c, &fanout.Message{Body: "x"}, "ok-first", fanout.Budget{Max: 1}); out.Class != fanout.Success {
		t.Fatalf("first send: %+v", out)
	}
	// Past the first batch's deadline, with the connection idle.
	time.Sleep(3 * c.direct.h2.writeTimeout / 2)
	// A body of four times the writer's buffer: three flushes as it fills.
	big := &fanout.Message{Body: strings.Repeat("b", 4*writeBufferSize)}
	if out := send(t, c, big, "ok-big", fanout.Budget{Max: 1}); out.Class != fanout.Success {
		t.Fatalf("a batch after an idle spell: %+v (written under the last batch's deadline?)", out)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want the one: the writer failed it", n)
	}
}
